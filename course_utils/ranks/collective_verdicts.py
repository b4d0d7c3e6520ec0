"""Notebook 00's verdicts on what the first collectives leave on every rank.

Each takes what `launch` returned from the notebook's rank function, so a function that
reduces to rank 0 alone, never broadcasts, or gathers to rank 0 alone fails it
(tests/ranks/test_collective_verdicts.py).
"""

from __future__ import annotations

import torch

from ..core.checks import Verdict, verdict


def all_reduce_left_the_sum(sums: list[float]) -> Verdict:
    """Each rank all-reduced its own rank: each must hold 0 + 1 + ... + (N - 1)."""
    n = len(sums)
    return verdict(
        sums == [n * (n - 1) / 2] * n, "after all_reduce every rank holds the sum of all ranks"
    )


def broadcast_left_one_tensor(copies: list[torch.Tensor]) -> Verdict:
    """Rank 0 drew a random tensor and broadcast it: every rank must hold exactly it."""
    return verdict(
        all(torch.equal(c, copies[0]) for c in copies),
        "after broadcast every rank holds rank 0's tensor",
    )


def all_gather_left_every_row(gathered: list[torch.Tensor]) -> Verdict:
    """Rank r filled a row with r and all-gathered it: every rank must hold rows 0 to N - 1."""
    n, width = gathered[0].shape
    rows = torch.arange(n, dtype=gathered[0].dtype).repeat_interleave(width).view(n, width)  # cpu
    return verdict(
        len(gathered) == n and all(torch.equal(g, rows) for g in gathered),
        "after all_gather every rank holds every rank's row",
    )
