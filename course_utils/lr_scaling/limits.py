"""Where the linear scaling rule stops, why, and the verdicts notebook 03 prints on it.

`summarize` averages the sweeps over seeds; a batch "keeps" the accuracy when its mean
test accuracy with scaled lr and warmup is at most `tolerance` below the base batch's.
`controls` reads the runs beyond the limit with the lr capped: for the same epochs (do
they still fall short? then too few updates) and for as many updates as the limit batch
made (do they catch up? then no worse minimum). Each verdict compares a measurement with
a stated threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.checks import verdict
from ..sgd.finished import finished_trials
from .experiments import RULE_LABELS, RULES, curve_distance


@dataclass
class ScalingSummary:
    """Means over seeds of each (rule, batch size): what the notebook prints and plots."""

    batch_sizes: list[int]
    base_batch: int
    tolerance: float
    per_seed: dict  # rule -> [[test accuracy per seed] per batch size]
    accuracy: dict  # rule -> [mean test accuracy per batch size]
    final_loss: dict  # rule -> [mean final training loss per batch size; inf if any diverged]
    curves: dict  # rule -> {batch size: mean per-epoch training loss}
    distance: dict  # rule -> [distance of the mean curve to the base batch's]
    steps: dict  # rule -> [updates per run, per batch size]
    kept: list[bool]  # per batch size: scaled lr + warmup within `tolerance` of the base
    limit: int | None  # the largest batch up to which `kept` holds at every size
    noise_scale: float | None  # B_noise at the base batch's solution, mean over seeds

    @property
    def base_accuracy(self) -> float:
        return self.accuracy["unscaled"][self.batch_sizes.index(self.base_batch)]

    @property
    def beyond(self) -> list[int]:
        """The batch sizes past the limit (all above the base when there is none)."""
        edge = self.limit or self.base_batch
        return [b for b in self.batch_sizes if b > edge]

    def table(self) -> str:
        """Mean test accuracy and final training loss of each rule at each batch size."""
        lines = [f"{'batch':>6} " + " ".join(f"{RULE_LABELS[r]:>22}" for r in RULES)]
        for i, b in enumerate(self.batch_sizes):
            cells = [
                f"{100 * self.accuracy[r][i]:7.1f}% (loss {self.final_loss[r][i]:6.3f})"
                for r in RULES
            ]
            lines.append(f"{b:6d} " + " ".join(f"{c:>22}" for c in cells))
        return "\n".join(lines)

    def failed(self, rule: str, stall_loss: float) -> list[bool]:
        """Per batch size: the run diverged, or stalled with its loss still above `stall_loss`."""
        return [not math.isfinite(v) or v > stall_loss for v in self.final_loss[rule]]


def summarize(base, result, base_batch: int, tolerance: float) -> ScalingSummary:
    """Average the sweeps over seeds and find where scaling with warmup stops keeping accuracy.

    `base` holds the base batch's runs (one per seed, standing for every rule: they all
    give it the base lr); `result` every larger batch under every rule.
    """
    trials = finished_trials(base) + finished_trials(result)
    if not any(t.params["batch_size"] == base_batch for t in base.trials):
        raise ValueError(f"the base batch {base_batch} is not among the base runs.")
    batches = sorted({t.params["batch_size"] for t in trials})
    groups: dict = {}
    for t in trials:
        rules = RULES if t.params["batch_size"] == base_batch else (t.params["rule"],)
        for rule in rules:
            groups.setdefault((rule, t.params["batch_size"]), []).append(t.metrics)
    per_seed, accuracy, final_loss, curves, steps = {}, {}, {}, {}, {}
    for rule in RULES:
        runs = [groups[rule, b] for b in batches]
        per_seed[rule] = [[m["test_acc"] for m in ms] for ms in runs]
        accuracy[rule] = [_mean(accs) for accs in per_seed[rule]]
        final_loss[rule] = [_mean([m["train_loss"] for m in ms]) for ms in runs]
        steps[rule] = [ms[0]["steps"] for ms in runs]
        curves[rule] = {
            b: _mean_curve([m["curve"] for m in ms]) for b, ms in zip(batches, runs, strict=True)
        }
    reference = curves["unscaled"][base_batch]
    distance = {r: [curve_distance(curves[r][b], reference) for b in batches] for r in RULES}
    base_acc = accuracy["unscaled"][batches.index(base_batch)]
    kept = [base_acc - acc <= tolerance for acc in accuracy["warmup"]]
    limit = None
    for b, ok in zip(batches, kept, strict=True):
        if not ok:
            break
        if b > base_batch:
            limit = b
    scales = [m.get("noise_scale") for m in groups["unscaled", base_batch]]
    noise = _mean(scales) if scales and None not in scales else None
    return ScalingSummary(
        batches, base_batch, tolerance, per_seed, accuracy, final_loss, curves, distance,
        steps, kept, limit, noise,
    )  # fmt: skip


@dataclass
class Controls:
    """Beyond the limit, the lr capped at `lr_cap`: mean accuracy and loss per batch size."""

    batch_sizes: list[int]
    lr_cap: float
    updates: int  # the limit batch's updates, given to the "more updates" runs
    budget_acc: list[float]  # the epoch budget (fewer updates than the limit batch made)
    budget_loss: list[float]
    budget_steps: list[int]
    long_acc: list[float]  # as many updates as the limit batch
    long_loss: list[float]


def controls(result) -> Controls:
    """Read the controls sweep (`experiments.controls_config`) as means over seeds."""
    finished_trials(result)
    groups: dict = {}
    for t in result.trials:
        key = (t.params["updates"] > 0, t.params["batch_size"])
        groups.setdefault(key, []).append(t.metrics)
    batches = sorted({b for _, b in groups})
    first = result.trials[0].params
    updates = max(t.params["updates"] for t in result.trials)

    def mean(long, metric):
        return [_mean([m[metric] for m in groups[long, b]]) for b in batches]

    return Controls(
        batches, first["lr_cap"], updates, mean(False, "test_acc"), mean(False, "train_loss"),
        [groups[False, b][0]["steps"] for b in batches], mean(True, "test_acc"),
        mean(True, "train_loss"),
    )  # fmt: skip


# --- the verdicts -------------------------------------------------------------------------


def base_is_repeatable(summary: ScalingSummary):
    """The tolerance must be wider than the base batch's own seed-to-seed spread."""
    accs = summary.per_seed["unscaled"][summary.batch_sizes.index(summary.base_batch)]
    return verdict(
        len(accs) >= 2 and max(accs) - min(accs) < summary.tolerance,
        "the base batch's test accuracy varies less from seed to seed than the tolerance",
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
    """At the largest batch the scaled lr fails with warmup, and the same batch trains capped."""
    largest = summary.batch_sizes[-1]
    failed = summary.failed("warmup", stall_loss)[-1]
    capped = largest in found.batch_sizes and found.budget_loss[-1] < stall_loss
    return verdict(
        failed and capped,
        "at the largest batch the scaled lr fails even with warmup, and trains when capped: "
        "the scaled lr is unstable there",
    )


def too_few_updates(summary: ScalingSummary, found: Controls):
    short = [summary.base_accuracy - a > summary.tolerance for a in found.budget_acc]
    return verdict(
        bool(short) and all(short),
        "capped, in the same epochs, every batch beyond the limit still falls short of the "
        "base by more than the tolerance: too few updates",
    )


def equal_updates_keep(summary: ScalingSummary, found: Controls):
    close = [summary.base_accuracy - a <= summary.tolerance for a in found.long_acc]
    return verdict(
        bool(close) and all(close),
        "capped, with as many updates as the limit batch, every one comes within the "
        "tolerance of the base: no worse minimum at equal updates",
    )


def linear_ahead_within_limit(summary: ScalingSummary):
    """Within the limit linear scaling (with warmup) ends higher than sqrt(k) at every batch."""
    edge = summary.limit or 0
    inside = [i for i, b in enumerate(summary.batch_sizes) if summary.base_batch < b <= edge]
    linear, root = summary.accuracy["warmup"], summary.accuracy["sqrt"]
    return verdict(
        bool(inside) and all(linear[i] > root[i] for i in inside),
        "up to the limit, linear scaling ends with higher accuracy than sqrt(k)",
    )


def sqrt_ahead_at_the_largest(summary: ScalingSummary):
    """At the largest batch sqrt(k) beats linear scaling by more than the tolerance."""
    linear, root = summary.accuracy["warmup"][-1], summary.accuracy["sqrt"][-1]
    return verdict(
        root > linear + summary.tolerance,
        "at the largest batch sqrt(k)'s smaller lr keeps more accuracy than linear scaling",
    )


def limit_near_noise_scale(summary: ScalingSummary, factor: float):
    """B_noise (McCandlish et al.) lies between the limit and the first batch lost, give or
    take `factor`: the batch where noise stops dominating is where scaling stops paying."""
    noise, limit = summary.noise_scale, summary.limit
    first_lost = summary.beyond[0] if summary.beyond else None
    ok = (
        noise is not None
        and limit is not None
        and first_lost is not None
        and limit / factor <= noise <= factor * first_lost
    )
    return verdict(
        ok,
        f"the noise scale B_noise lies within {factor:g}x of where linear scaling stops "
        "(between the limit and the first batch it loses)",
    )


# --- titles computed from the result ------------------------------------------------------


def curve_titles(summary: ScalingSummary, stall_loss: float) -> dict:
    """Panel titles for `charts.curves_by_rule` that say what the curves did."""
    fixed = summary.distance["unscaled"][1:]
    fan = all(b > a for a, b in zip(fixed, fixed[1:], strict=False))
    failed = summary.failed("scaled", stall_loss)
    trained = [i for i, f in enumerate(failed) if not f and i > 0]
    close = bool(trained) and all(
        summary.distance["scaled"][i] < summary.distance["unscaled"][i] / 3 for i in trained
    )
    scaled = "lr scaled: the curves " + ("coincide" if close else "do not coincide")
    broken = [
        f"{b} {'diverges' if not math.isfinite(v) else 'stalls'}"
        for b, v, f in zip(summary.batch_sizes, summary.final_loss["scaled"], failed, strict=True)
        if f
    ]
    if broken:
        scaled += ", until batch " + ", ".join(broken)
    return {
        "unscaled": "lr fixed: the curves " + ("fan out" if fan else "do not fan out in order"),
        "scaled": scaled,
    }


def rescue_title(rescued: list[int], failing: list[int]) -> str:
    if not failing:
        return "no scaled run stalled: nothing for warmup to rescue"
    if not rescued:
        return "warmup rescues none of the stalled large-batch runs"
    lost = [b for b in failing if b not in rescued]
    tail = f"; at {lost} it fails too" if lost else ""
    return f"warmup lets batch {rescued} train again{tail}"


def limit_title(summary: ScalingSummary) -> str:
    if summary.limit is None:
        return "scaled lr + warmup loses accuracy at every batch above the base"
    return (
        f"scaled lr + warmup keeps the accuracy (within {100 * summary.tolerance:g} points) "
        f"up to batch {summary.limit}"
    )


def _mean(values: list[float]) -> float:
    """The mean, or inf when any run diverged (a NaN loss must not look like a small one)."""
    if any(not math.isfinite(v) for v in values):
        return math.inf
    return sum(values) / len(values)


def _mean_curve(curves: list[list[float]]) -> list[float]:
    return [_mean(list(values)) for values in zip(*curves, strict=True)]
