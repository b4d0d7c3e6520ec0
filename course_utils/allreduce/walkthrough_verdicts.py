"""Notebook 05's worked examples as verdicts: what each rank holds after each round of a
traced run (`runs.traced_run`) of the lecture's inputs, the values a learner can check by
hand in the table printed above each.

Each takes the traced run itself, so a swapped-in algorithm that sums in another pattern
(a chain instead of a tree, a ring that adds the wrong chunk) fails it
(tests/allreduce/test_walkthrough_verdicts.py).
"""

from __future__ import annotations

from ..core.checks import Verdict, verdict


def after_round(traced: list, i: int) -> list:
    """Every rank's values after round `i` (0: the input): a number for a one-element
    tensor, else a list."""
    values = [t.rounds[i].value for t in traced]
    return [v.item() if v.numel() == 1 else v.tolist() for v in values]


def tree_example(traced: list) -> Verdict:
    """7 ranks holding 1 to 7: the partial sums 8 and 13 after one round, the root's 28
    after two, 28 on every rank at the end."""
    new = [sorted(set(after_round(traced, i)) - set(range(1, 8))) for i in (1, 2)]
    return verdict(
        len(traced[0].rounds) > 2 and new == [[8, 13], [8, 13, 28]]
        and after_round(traced, -1) == [28] * 7,
        "the tree: after one round two ranks hold 8 and 13, after the next the root holds 28, "
        "and after the broadcast rounds every rank holds 28",
    )  # fmt: skip


def butterfly_example(traced: list) -> Verdict:
    """4 ranks holding 1 to 4: pairs hold 3 and 7 after one round, all hold 10 after two."""
    return verdict(
        len(traced[0].rounds) == 3
        and after_round(traced, 1) == [3, 3, 7, 7]
        and after_round(traced, 2) == [10] * 4,
        "the butterfly: after one round pairs of ranks hold 3 and 7, after two every rank holds 10",
    )


def ring_example(traced: list) -> Verdict:
    """4 ranks holding four copies of `rank + 1`: after the reduce-scatter's 3 steps rank r
    holds the sum 10 in chunk r and in no other chunk; after the all-gather's 3, 10
    everywhere."""
    n = len(traced)
    scattered = after_round(traced, n - 1) if len(traced[0].rounds) > n - 1 else []
    return verdict(
        len(scattered) == n
        and all(row[r] == 10 and row.count(10) == 1 for r, row in enumerate(scattered))
        and after_round(traced, -1) == [[10] * n] * n,
        "the ring: after the reduce-scatter rank r holds the full sum of chunk r and only "
        "that chunk (the other sums are still partial); after the all-gather every rank "
        "holds every sum",
    )
