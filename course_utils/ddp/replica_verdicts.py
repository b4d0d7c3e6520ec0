"""Notebook 04's verdicts on what the replicas did: the weights they end with against one
process's, the curve they train along against one process's at either batch, the accuracy
the linear scaling rule gives back, and when DDP's first all-reduce starts against the
backward pass.

Each takes what the notebook's run returned (`equivalence.equivalence`,
`experiments.compare_with_single`, `experiments.lr_scaling`, `cost.overlap_timeline`), so
a run that averages wrongly, never averages, sums without dividing, never scales its lr,
stops short of the rule's limit, or reduces in one bucket after the backward fails it
(tests/ddp/test_replica_verdicts.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.checks import Verdict, verdict
from ..core.sizes import ScalingSizes

# fp32: the replicas add the same gradients as one process, in another order, which moves
# the weights by rounding alone (1e-8 after 20 updates here); a sum not divided by N, or a
# replica that never averages, moves them by the lr times a gradient (1e-3 and more)
TOLERANCE = 1e-5  # the line says it

# DDP and one process at N*b differ only in how they shuffle (a mean gap of 0.002-0.005 in
# validation loss here), one process at b by N times the updates (0.13-0.28); a DDP that
# sums the gradients without dividing by N follows b instead (its gap to N*b 9-25x its gap
# to b, on 2 and 4 ranks). "Far closer" is a factor that shuffling alone cannot undo.
FAR_CLOSER = 5


def equals_one_process(result) -> Verdict:
    """The replicas' weights after `result.steps` updates within `TOLERANCE` of one process
    trained on the N-times batch made of the same samples."""
    claim = (
        "averaging gradients by hand equals one process with the N-times batch"
        if result.mode == "by_hand"
        else f"DDP on N ranks equals one process with the N-times batch after {result.steps} "
        "updates"
    )
    return verdict(result.max_abs_diff <= TOLERANCE, f"{claim} (to 1e-5)")


def closer_to_the_effective_batch(comparison) -> Verdict | None:
    """DDP's validation curve is `FAR_CLOSER` times closer to one process at the effective
    batch N*b than at the per-rank batch b. With one rank the two batches are the same
    (the gpu profile on one GPU): a line says so, and nothing is judged."""
    if comparison.world_size < 2:
        print(
            "- with 1 rank the effective batch is the per-rank batch, so there is nothing to "
            "compare: this needs 2 ranks or more (2 GPUs, or the cpu profile's 4 gloo ranks)"
        )
        return None
    return verdict(
        comparison.gap_to_effective * FAR_CLOSER < comparison.gap_to_per_rank,
        "DDP's curve is far closer to one process at the effective batch than at the per-rank "
        "batch",
    )


# "far short": five times the 0.02 of test accuracy below the base batch that notebook 03
# still counts as kept (`ScalingSizes.tolerance`)
FAR_SHORT = 5 * ScalingSizes.tolerance


@dataclass(frozen=True)
class ScalingGains:
    """`experiments.lr_scaling`'s rows read as the lesson reads them: the base effective
    batch, the next and the largest, with their accuracies."""

    base: int
    middle: int
    largest: int
    accuracy: dict  # (effective batch, scaled) -> test accuracy

    @property
    def lost(self) -> float:
        """What a fixed lr loses from the base to the next batch."""
        return self.accuracy[self.base, False] - self.accuracy[self.middle, False]

    @property
    def regained(self) -> float:
        """What scaling the lr gives back at the next batch."""
        return self.accuracy[self.middle, True] - self.accuracy[self.middle, False]


def scaling_gains(rows) -> ScalingGains:
    batches = sorted({r.effective_batch for r in rows})
    accuracy = {(r.effective_batch, r.scaled): r.test_acc for r in rows}
    return ScalingGains(batches[0], batches[1], batches[-1], accuracy)


def scaling_regains_most(gains: ScalingGains) -> Verdict:
    """At the next batch the scaled lr gives back more than half of what the fixed lr lost."""
    return verdict(
        gains.regained > 0.5 * gains.lost,
        f"at {gains.middle // gains.base}x the base batch, scaling the lr regains most of the "
        "accuracy a fixed lr loses",
    )


def rule_stops_helping(gains: ScalingGains) -> Verdict:
    """At the largest batch the scaled lr's accuracy lies `FAR_SHORT` below the base's."""
    return verdict(
        gains.accuracy[gains.largest, True] < gains.accuracy[gains.base, False] - FAR_SHORT,
        "at the largest effective batch even the scaled lr falls far short: the rule stops helping",
    )


def first_bucket_overlaps_backward(timeline: dict) -> Verdict:
    """The first all-reduce starts before the first layer's gradient exists: DDP sends a
    full bucket while the backward pass is still on earlier layers (rank 0's wall clock,
    one step)."""
    first_start = timeline["allreduces"][0][0]
    return verdict(
        first_start < dict(timeline["layers"])["layer 1"],
        "the first bucket's all-reduce starts before the first layer's gradient is computed",
    )
