"""Notebook 10's context- and expert-parallel claims as verdicts, each a measured number
against a stated threshold. The numbers go on the line before; the verdict carries none.
"""

from __future__ import annotations

from ..core.checks import Verdict, verdict
from .cp_ep_runs import MoERun, RingRun


def ring_attention_equals_full(runs: list[RingRun], tolerance: float = 1e-5) -> Verdict:
    """Every run's output and gradients against full causal attention (relative difference)."""
    ok = bool(runs) and all(r.out_diff <= tolerance and r.grad_diff <= tolerance for r in runs)
    layouts = " and ".join(sorted({r.layout for r in runs}))
    return verdict(
        ok,
        f"ring attention ({layouts} split) gives full causal attention's output and "
        f"gradients on every number of ranks tried, within {tolerance:g}",
    )


def zigzag_balances_work(work: list[int], threshold: float = 1.1,
                         layout: str = "zigzag") -> Verdict:  # fmt: skip
    """`work`: query-key scores per rank under the split `layout` (`work_per_rank`)."""
    ratio = max(work) / min(work)
    return verdict(
        ratio <= threshold,
        f"with the {layout} split, the busiest rank computes at most {threshold:g}x the "
        f"scores of the least busy one",
    )


def ep_equals_one_process(runs: list[MoERun], tolerance: float = 1e-5) -> Verdict:
    ok = bool(runs) and all(r.out_diff <= tolerance and r.grad_diff <= tolerance for r in runs)
    return verdict(
        ok,
        f"the expert-parallel MoE gives the one-process MoE's output and gradients (input, "
        f"router, experts) for every router and number of ranks tried, within {tolerance:g}",
    )


def bytes_match_formula(runs: list[RingRun] | list[MoERun], what: str) -> Verdict:
    """Every rank's logged bytes, forward and backward, equal to the formula's, exactly.

    `what` names the formula in the claim, e.g. "ring attention's 2(N-1) K,V blocks"."""

    def expected(run, rank):
        return run.formula[rank] if isinstance(run.formula, list) else run.formula

    ok = bool(runs) and all(
        sent[d] == expected(run, rank)[d]
        for run in runs
        for rank, sent in enumerate(run.sent)
        for d in ("forward", "backward")
    )
    return verdict(ok, f"every rank sent exactly the bytes {what} predicts, both directions")


def imbalance(tokens_per_rank: list[int]) -> float:
    """The busiest rank's tokens over the mean: 1 is perfectly balanced."""
    return max(tokens_per_rank) / (sum(tokens_per_rank) / len(tokens_per_rank))


def skewed_router_unbalances_ranks(balanced: MoERun, skewed: MoERun,
                                   threshold: float = 1.25) -> Verdict:  # fmt: skip
    """The skewed router's busiest rank at least `threshold` times the mean load, the
    balanced router's below it (tokens each rank's experts computed, after the capacity)."""
    ok = imbalance(skewed.tokens_per_rank) >= threshold > imbalance(balanced.tokens_per_rank)
    return verdict(
        ok,
        f"a router biased towards expert 0 loads its rank at least {threshold:g}x the mean, "
        f"a balanced router stays below",
    )
