"""Notebook 02's verdicts: each compares what the arms measured with a stated threshold.

An arm is a dict of metric -> one value per seed, with the seeds under "seed" (`results`).
Claims about one arm against another are judged seed by seed where they say "at every
seed", on the means where they say "on average"; sharpness claims hold for both measures,
Keskar's epsilon-sharpness and the top Hessian eigenvalue, or fail.
"""

from __future__ import annotations

from statistics import fmean

from ..core.checks import verdict
from .arms import edge_of_stability
from .results import gaps, paired

MEASURES = ("sharpness", "hessian")


def every_run_fits(runs: dict, fit_accuracy: float):
    """Every run of every arm reached the loss target and classifies `fit_accuracy` right."""
    ok = all(all(s["fitted"]) and min(s["train_acc"]) >= fit_accuracy for s in runs.values())
    return verdict(
        ok,
        f"every run fits the training set: loss under the target, {fit_accuracy:.0%}+ of it right",
    )


def more_passes(small: dict, large: dict):
    """Fitting takes the large batch more epochs at every seed."""
    ok = all(b > a for a, b in paired(small, large, "epochs"))
    return verdict(ok, "the large batch needs more passes over the data to fit...")


def fewer_updates(small: dict, large: dict):
    """...and fewer updates at every seed, so it is not short of steps."""
    ok = all(b < a for a, b in paired(small, large, "steps"))
    return verdict(ok, "...but fewer updates: it is not short of steps any more")


def tests_worse(better: dict, worse: dict, what: str, than: str, points: float = 1.0):
    """`worse` tests below `better` at every seed, and by over `points` on average."""
    g = gaps(better, worse)
    ok = bool(g) and min(g) > 0 and 100 * fmean(g) > points
    return verdict(
        ok, f"{what} tests worse than {than} at every seed, by over {points:g} point on average"
    )


def tests_as_well(reference: dict, other: dict, what: str, than: str, points: float = 1.0):
    """`other` tests within `points` of `reference` at every seed, either way."""
    g = gaps(reference, other)
    ok = bool(g) and all(abs(100 * x) < points for x in g)
    return verdict(ok, f"{what} tests within {points:g} point of {than} at every seed")


def sharper(flat: dict, sharp: dict, what: str, than: str, factor: float = 1.5):
    """By both measures, `sharp` is sharper than `flat` at every seed and over `factor`x on
    average."""
    ok = all(
        fmean(sharp[k]) > factor * fmean(flat[k]) and all(b > a for a, b in paired(flat, sharp, k))
        for k in MEASURES
    )
    return verdict(
        ok,
        f"{what} ends sharper than {than} by both measures: over {factor:g}x on average, "
        "and at every seed",
    )


def warmup_changes_little(plain: dict, warm: dict, points: float = 1.0, factor: float = 1.25):
    """The same batch and lr with and without warmup: mean test accuracy within `points`, and
    each mean sharpness within `factor`x either way."""
    close_acc = abs(100 * (fmean(plain["test_acc"]) - fmean(warm["test_acc"]))) < points
    close_sharp = all(1 / factor < fmean(warm[k]) / fmean(plain[k]) < factor for k in MEASURES)
    return verdict(
        close_acc and close_sharp,
        f"the warmup alone changes little: mean test accuracy within {points:g} point, "
        f"mean sharpness within {factor:g}x by both measures",
    )


def _lr_over_b(side: dict) -> float:
    return side["lr"][0] / side["batch_size"][0]


def flatter_at_higher_lr(runs: dict, factor: float = 1.5):
    """At each of two or more batch sizes, with arms at two or more lrs each, every run at a
    higher lr is over `factor`x flatter than every run at a lower lr, by both measures.
    Unfitted runs fail it: their sharpness was taken at a higher loss."""
    by_batch: dict = {}
    for side in runs.values():
        by_batch.setdefault(side["batch_size"][0], []).append(side)
    ok = all(all(s["fitted"]) for s in runs.values())
    for sides in by_batch.values():
        ok &= len({s["lr"][0] for s in sides}) > 1
        for low in sides:
            for high in sides:
                if high["lr"][0] > low["lr"][0]:
                    ok &= all(min(low[k]) > factor * max(high[k]) for k in MEASURES)
    return verdict(
        ok and len(by_batch) > 1,
        f"at each batch size the higher lr ends flatter: every run over {factor:g}x less sharp "
        "than every run at the lower lr, by both measures",
    )


def larger_batch_not_sharper_at_equal_lr_over_b(runs: dict, factor: float = 1.2):
    """Arms of different batch sizes at the same lr/B: the larger batch's mean sharpness is
    at most `factor` times the smaller batch's, by both measures (needs at least one such
    pair). Keskar's picture, a larger batch sharper whatever its lr, fails it; a larger
    batch that ends flatter passes."""
    pairs = [
        (a, b)
        for a in runs.values()
        for b in runs.values()
        if b["batch_size"][0] > a["batch_size"][0] and abs(_lr_over_b(a) / _lr_over_b(b) - 1) < 1e-9
    ]
    ok = bool(pairs) and all(
        fmean(b[k]) / fmean(a[k]) <= factor for a, b in pairs for k in MEASURES
    )
    return verdict(
        ok,
        "at the same lr/B the larger batch ends no sharper than the smaller: its mean at most "
        f"{factor:g}x the smaller batch's by both measures",
    )


def below_edge_of_stability(runs: dict, momentum: float, share: float = 0.5):
    """Every run's top eigenvalue is under `share` of (2 + 2 momentum) / lr, the curvature at
    which momentum gradient descent at its lr turns unstable."""
    ok = all(
        h < share * edge_of_stability(lr, momentum)
        for side in runs.values()
        for h, lr in zip(side["hessian"], side["lr"], strict=True)
    )
    return verdict(
        ok,
        f"every run's top eigenvalue stays under {share:.0%} of (2 + 2 momentum) / lr: "
        "no run sits at the edge of stability",
    )


def valley_narrower(widths: list[tuple[float, float]], share: float = 0.8):
    """At every seed the loss rises past the large-batch end within `share` of the distance
    it takes past the small-batch end."""
    return verdict(
        bool(widths) and all(w_large < share * w_small for w_small, w_large in widths),
        f"at every seed the large-batch valley is narrower: the loss rises in under {share:g}x "
        "the distance",
    )


def lowest_test_loss_near_small(best_alphas: list[float]):
    """Along every line the lowest test loss lies on the small-batch half (alpha < 0.5)."""
    return verdict(
        bool(best_alphas) and all(a < 0.5 for a in best_alphas),
        "along every line the test loss is lowest on the small-batch side",
    )


def line_has_barrier(ridges: list[float], rise: float = 1.5):
    """Along every straight line the training loss somewhere exceeds `rise` x the higher end.

    A barrier on the straight line only: it does not show that no curved low-loss path
    joins the two solutions (Garipov et al. 2018 and Draxler et al. 2018 found such paths).
    """
    return verdict(
        bool(ridges) and all(r > rise for r in ridges),
        f"on the straight line between the two solutions the training loss rises over {rise:g}x "
        "its value at the ends",
    )
