"""Notebook 04's verdicts on what the replicas did: the weights they end with against one
process's, and when DDP's first all-reduce starts against the backward pass.

Each takes what the notebook's run returned (`equivalence.equivalence`,
`cost.overlap_timeline`), so a run that averages wrongly, never averages, or reduces in
one bucket after the backward fails it (tests/ddp/test_replica_verdicts.py).
"""

from __future__ import annotations

from ..core.checks import Verdict, verdict

__all__ = ["first_bucket_overlaps_backward", "equals_one_process"]

# fp32: the replicas add the same gradients as one process, in another order, which moves
# the weights by rounding alone (1e-8 after 20 updates here); a sum not divided by N, or a
# replica that never averages, moves them by the lr times a gradient (1e-3 and more)
TOLERANCE = 1e-5  # the line says it


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


def first_bucket_overlaps_backward(timeline: dict) -> Verdict:
    """The first all-reduce starts before the first layer's gradient exists: DDP sends a
    full bucket while the backward pass is still on earlier layers (rank 0's wall clock,
    one step)."""
    first_start = timeline["allreduces"][0][0]
    return verdict(
        first_start < dict(timeline["layers"])["layer 1"],
        "the first bucket's all-reduce starts before the first layer's gradient is computed",
    )
