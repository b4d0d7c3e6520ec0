"""Where the linear scaling rule stops, and why: the sweeps of notebook 03 read as means.

`summarize` averages the sweeps over seeds; a batch "keeps" the accuracy when its mean
test accuracy with scaled lr and warmup is at most `tolerance` below the base batch's.
`controls` reads the runs beyond the limit with the lr capped: for the same epochs (do
they still fall short? then too few updates) and for as many updates as the limit batch
made (do they catch up?). The verdicts on both are in `verdicts`; the charts' titles,
computed from the result, are here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .experiments import RULE_LABELS, RULES, curve_distance


@dataclass
class ScalingSummary:
    """Means over seeds of each (rule, batch size): what the notebook prints and plots."""

    batch_sizes: list[int]
    base_batch: int
    tolerance: float
    per_seed: dict  # rule -> [[test accuracy per seed] per batch size]
    accuracy: dict  # rule -> [mean test accuracy per batch size]
    final_loss: dict  # rule -> [mean full-data training loss at the end; inf: one diverged]
    seed_loss: dict  # rule -> [[that loss, per seed] per batch size]
    curves: dict  # rule -> {batch size: each epoch's mean mini-batch loss, mean over seeds}
    distance: dict  # rule -> [distance of the mean curve to the base batch's]
    steps: dict  # rule -> [updates per run, per batch size]
    kept: list[bool]  # per batch size: scaled lr + warmup within `tolerance` of the base
    limit: int | None  # the largest batch up to which `kept` holds at every size
    noise_scale: float | None  # B_simple at the base batch's solution, mean over seeds
    noise_scales: list[float]  # ...and per seed (empty where it was not measured)

    @property
    def base_accuracy(self) -> float:
        return self.accuracy["unscaled"][self.batch_sizes.index(self.base_batch)]

    @property
    def beyond(self) -> list[int]:
        """The batch sizes past the limit (all above the base when there is none)."""
        edge = self.limit or self.base_batch
        return [b for b in self.batch_sizes if b > edge]

    def table(self) -> str:
        """Mean test accuracy and full-data training loss at the end, per rule and batch size."""
        lines = [f"{'batch':>6} " + " ".join(f"{RULE_LABELS[r]:>22}" for r in RULES)]
        for i, b in enumerate(self.batch_sizes):
            cells = [
                f"{100 * self.accuracy[r][i]:7.1f}% (loss {self.final_loss[r][i]:6.3f})"
                for r in RULES
            ]
            lines.append(f"{b:6d} " + " ".join(f"{c:>22}" for c in cells))
        return "\n".join(lines)

    def stalled(self, rule: str, stall_loss: float) -> list[int]:
        """Per batch size: the seeds whose run diverged or ended above `stall_loss`."""
        return [
            sum(not math.isfinite(v) or v > stall_loss for v in losses)
            for losses in self.seed_loss[rule]
        ]

    def failed(self, rule: str, stall_loss: float) -> list[bool]:
        """Per batch size: a seed's run stalled or diverged. A rule trains a batch size only
        where it trains every seed; a mean over seeds would call 1 stall in 3 a mild loss."""
        return [n > 0 for n in self.stalled(rule, stall_loss)]


def summarize(base, result, base_batch: int, tolerance: float) -> ScalingSummary:
    """Average the sweeps over seeds and find where scaling with warmup stops keeping accuracy.

    `base` holds the base batch's runs (one per seed, standing for every rule: they all
    give it the base lr); `result` every larger batch under every rule.
    """
    trials = base.finished() + result.finished()
    if not any(t.params["batch_size"] == base_batch for t in base.trials):
        raise ValueError(f"the base batch {base_batch} is not among the base runs.")
    batches = sorted({t.params["batch_size"] for t in trials})
    groups: dict = {}
    for t in trials:
        rules = RULES if t.params["batch_size"] == base_batch else (t.params["rule"],)
        for rule in rules:
            groups.setdefault((rule, t.params["batch_size"]), []).append(t.metrics)
    per_seed, accuracy, final_loss, seed_loss, curves, steps = {}, {}, {}, {}, {}, {}
    for rule in RULES:
        runs = [groups[rule, b] for b in batches]
        per_seed[rule] = [[m["test_acc"] for m in ms] for ms in runs]
        accuracy[rule] = [_mean(accs) for accs in per_seed[rule]]
        seed_loss[rule] = [[m["train_loss"] for m in ms] for ms in runs]
        final_loss[rule] = [_mean(losses) for losses in seed_loss[rule]]
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
    scales = scales if scales and None not in scales else []
    return ScalingSummary(
        batches, base_batch, tolerance, per_seed, accuracy, final_loss, seed_loss, curves,
        distance, steps, kept, limit, _mean(scales) if scales else None, scales,
    )  # fmt: skip


@dataclass
class Controls:
    """Beyond the limit, the lr capped at `lr_cap`: mean accuracy and loss per batch size."""

    batch_sizes: list[int]
    lr_cap: float
    updates: int  # the limit batch's updates, given to the "more updates" runs
    budget_acc: list[float]  # the epoch budget (fewer updates than the limit batch made)
    budget_loss: list[float]
    budget_worst_loss: list[float]  # the highest over the seeds: trains only if every seed does
    budget_steps: list[int]
    long_acc: list[float]  # as many updates as the limit batch
    long_loss: list[float]


def controls(result) -> Controls:
    """Read the controls sweep (`experiments.controls_config`) as means over seeds."""
    result.finished()
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
        [_worst([m["train_loss"] for m in groups[False, b]]) for b in batches],
        [groups[False, b][0]["steps"] for b in batches], mean(True, "test_acc"),
        mean(True, "train_loss"),
    )  # fmt: skip


# --- titles computed from the result ------------------------------------------------------


# The scaled lr's curve "coincides" with the base's where it is more than this many times
# closer to it than the fixed lr's: it removes two thirds of the gap the fixed lr leaves.
CLOSER = 3


def scaled_closeness(summary: ScalingSummary, stall_loss: float) -> tuple[list[int], list]:
    """The batches above the base (as indices) where the scaled lr trains every seed, and at
    each how many times closer its curve is to the base batch's than the fixed lr's."""
    failed = summary.failed("scaled", stall_loss)
    trained = [i for i, f in enumerate(failed) if not f and i > 0]
    distance = summary.distance
    ratios = [
        distance["unscaled"][i] / distance["scaled"][i] if distance["scaled"][i] else math.inf
        for i in trained
    ]
    return trained, ratios


def curve_titles(summary: ScalingSummary, stall_loss: float) -> dict:
    """Panel titles for `charts.curves_by_rule` that say what the curves did."""
    fixed = summary.distance["unscaled"][1:]
    fan = all(b > a for a, b in zip(fixed, fixed[1:], strict=False))
    trained, ratios = scaled_closeness(summary, stall_loss)
    close = bool(trained) and all(r > CLOSER for r in ratios)
    scaled = "lr scaled: the curves " + ("coincide" if close else "do not coincide")
    stalled = summary.stalled("scaled", stall_loss)
    broken = [
        f"{b} {'diverges' if not math.isfinite(v) else 'stalls'} in {n} of {len(losses)} seeds"
        for b, v, n, losses in zip(
            summary.batch_sizes, summary.final_loss["scaled"], stalled,
            summary.seed_loss["scaled"], strict=True,
        )
        if n
    ]  # fmt: skip
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
        return (
            f"warmup does not make every seed train at batch {batch_list(failing)}:\n"
            "at each, some seed still stalls"
        )
    lost = [b for b in failing if b not in rescued]
    tail = f"; at {batch_list(lost)} it fails too" if lost else ""
    return (
        f"warmup lets {'batch' if len(rescued) == 1 else 'batches'} {batch_list(rescued)} "
        f"train again{tail}"
    )


def batch_list(batches) -> str:
    """Batch sizes as a reader writes them: '1024', '1024 and 2048', '8, 32 and 128'."""
    names = [str(b) for b in batches]
    if len(names) < 2:
        return "".join(names) or "none"
    return ", ".join(names[:-1]) + " and " + names[-1]


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


def _worst(losses: list[float]) -> float:
    return math.inf if any(not math.isfinite(v) for v in losses) else max(losses)


def _mean_curve(curves: list[list[float]]) -> list[float]:
    return [_mean(list(values)) for values in zip(*curves, strict=True)]
