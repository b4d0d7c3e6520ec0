"""The verdicts notebook 03 prints on where linear scaling stops, and why.

Each compares a measurement with a stated threshold and says which way it looks: "falls
short by more than the tolerance" is a drop below the base batch; "no more than the
tolerance below" is one-sided, so a run that ends above the base passes it too. Every rule
trains for the same epochs, and the verdicts on the sqrt(k) rule say so: Hoffer et al.
(2017), who argued for it, also trained the large batches for longer.
"""

from __future__ import annotations

from ..core.checks import verdict
from .limits import CLOSER, Controls, ScalingSummary, scaled_closeness

# "loses a lot": ten times the tolerance that still counts as kept
FIXED_LR_LOSS = 10


def base_is_repeatable(summary: ScalingSummary):
    """The tolerance must be wider than the base batch's own seed-to-seed spread."""
    accs = summary.per_seed["unscaled"][summary.batch_sizes.index(summary.base_batch)]
    return verdict(
        len(accs) >= 2 and max(accs) - min(accs) < summary.tolerance,
        "the base batch's test accuracy varies less from seed to seed than the tolerance",
    )


def scaled_curves_coincide(summary: ScalingSummary, stall_loss: float):
    """At two batches or more the scaled lr trains every seed, and at each its curve is over
    `CLOSER` times closer to the base batch's than the fixed lr's. (Its test: a rule whose
    lr is never scaled prints ✗.)"""
    trained, ratios = scaled_closeness(summary, stall_loss)
    return verdict(
        len(trained) >= 2 and all(r > CLOSER for r in ratios),
        f"wherever the scaled lr trains, its curve is over {CLOSER}x closer to the base than "
        "the fixed lr's",
    )


def fixed_lr_loses_at_the_largest(summary: ScalingSummary):
    """At the largest batch the fixed lr ends `FIXED_LR_LOSS` tolerances below the base.
    (Its test: a sweep that stops at twice the base batch prints ✗.)"""
    bar = FIXED_LR_LOSS * summary.tolerance
    lost = summary.base_accuracy - summary.accuracy["unscaled"][-1]
    return verdict(
        lost > bar,
        f"at a fixed lr the largest batch loses over {100 * bar:g} points of accuracy",
    )


def kept_up_to(summary: ScalingSummary, at_least: int):
    return verdict(
        summary.limit is not None and summary.limit >= at_least * summary.base_batch,
        f"scaled lr + warmup keeps the accuracy within the tolerance up to {at_least}x "
        "the base batch or more",
    )


def breaks_beyond(summary: ScalingSummary):
    lost = [not summary.kept[summary.batch_sizes.index(b)] for b in summary.beyond]
    return verdict(
        summary.limit is not None and bool(lost) and all(lost),
        "beyond that limit it falls short by more than the tolerance at every batch size",
    )


def unstable_at_the_largest(summary: ScalingSummary, found: Controls, stall_loss: float):
    """At the largest batch the scaled lr fails with warmup, and capped the same batch trains
    in every seed."""
    largest = summary.batch_sizes[-1]
    failed = summary.failed("warmup", stall_loss)[-1]
    capped = largest in found.batch_sizes and found.budget_worst_loss[-1] <= stall_loss
    return verdict(
        failed and capped,
        "at the largest batch the scaled lr fails even with warmup, and capped it trains in "
        "every seed: the scaled lr is unstable there",
    )


def scaled_stalls_at_the_largest(summary: ScalingSummary, stall_loss: float):
    """Every seed's run at the largest batch, at the scaled lr without warmup, stalls."""
    stalled = summary.stalled("scaled", stall_loss)[-1]
    return verdict(
        stalled == len(summary.seed_loss["scaled"][-1]),
        "at the largest batch the scaled lr alone stalls or diverges in every seed",
    )


def warmup_rescues_none(summary: ScalingSummary, stall_loss: float):
    """Wherever the scaled lr stalls in a seed, warmup also leaves a seed stalled: it makes no
    such batch size train in every seed. (Its test: a batch that warmup rescues prints ✗.)"""
    failing = [i for i, f in enumerate(summary.failed("scaled", stall_loss)) if f]
    with_warmup = summary.failed("warmup", stall_loss)
    return verdict(
        bool(failing) and all(with_warmup[i] for i in failing),
        "warmup makes none of the batch sizes where the scaled lr stalls train in every seed",
    )


def too_few_updates(summary: ScalingSummary, found: Controls):
    short = [summary.base_accuracy - a > summary.tolerance for a in found.budget_acc]
    return verdict(
        bool(short) and all(short),
        "capped, in the same epochs, every batch beyond the limit still falls short of the "
        "base by more than the tolerance: too few updates",
    )


def equal_updates_keep(summary: ScalingSummary, found: Controls):
    """One-sided: given the limit batch's updates, no batch beyond the limit ends more than the
    tolerance below the base. Those updates carry more samples than the limit batch saw (b /
    limit times as many), so a run that ends above the base passes and proves no more."""
    close = [summary.base_accuracy - a <= summary.tolerance for a in found.long_acc]
    return verdict(
        bool(close) and all(close),
        "capped and given as many updates as the limit batch (so more samples than it saw), "
        "no batch beyond the limit ends more than the tolerance below the base",
    )


def linear_ahead_within_limit(summary: ScalingSummary):
    """Within the limit linear scaling (with warmup) ends higher than sqrt(k) at every batch."""
    edge = summary.limit or 0
    inside = [i for i, b in enumerate(summary.batch_sizes) if summary.base_batch < b <= edge]
    linear, root = summary.accuracy["warmup"], summary.accuracy["sqrt"]
    return verdict(
        bool(inside) and all(linear[i] > root[i] for i in inside),
        "in the same epochs, up to the limit, linear scaling ends with higher test accuracy "
        "than sqrt(k) at every batch size",
    )


def sqrt_ahead_at_the_largest(summary: ScalingSummary):
    """At the largest batch sqrt(k) beats linear scaling by more than the tolerance."""
    linear, root = summary.accuracy["warmup"][-1], summary.accuracy["sqrt"][-1]
    return verdict(
        root > linear + summary.tolerance,
        "in the same epochs, at the largest batch, sqrt(k)'s smaller lr ends above linear "
        "scaling by more than the tolerance",
    )


def limit_near_noise_scale(summary: ScalingSummary, factor: float, elsewhere: float | None):
    """Each B_noise measured, this notebook's (mean over seeds) and `elsewhere` (notebook 01's
    point), lies between the limit and the first batch lost, widened by `factor` at each end:
    the batch where noise stops dominating is where scaling stops paying (McCandlish et al.)."""
    limit = summary.limit
    first_lost = summary.beyond[0] if summary.beyond else None
    values = [summary.noise_scale, elsewhere]
    ok = (
        limit is not None
        and first_lost is not None
        and all(v is not None and limit / factor <= v <= factor * first_lost for v in values)
    )
    return verdict(
        ok,
        f"B_simple, here and at notebook 01's point, lies between the limit and the first "
        f"batch the rule loses, give or take {factor:g}x",
    )
