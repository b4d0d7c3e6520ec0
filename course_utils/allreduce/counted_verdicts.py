"""Notebook 05's verdicts on what its runs counted: results against `dist.all_reduce`,
each rank's rounds and bytes against the cost model's formulas, the busiest rank against
the floor any all-reduce must send.

They take the rows `runs.compare_with_builtin` returns, one per algorithm, N, length and
dtype, whose bytes the recorder counted where they crossed `torch.distributed`, not the
algorithm's own tally; so each fails on an algorithm that sends other bytes than its
formula, or the wrong sum (tests/allreduce/test_counted_verdicts.py runs such algorithms
through the same rows).
"""

from __future__ import annotations

import torch

from ..core.checks import Verdict, verdict
from . import cost_model
from .walkthrough_verdicts import after_round


def floor(n: int) -> float:
    """What any all-reduce's busiest rank sends, as a share of the message: 2(N-1)/N (its
    data has to leave it, and the sum has to arrive)."""
    return cost_model.bandwidth_floor_bytes(n, 1)


def matches_formula(row: dict) -> bool:
    """A row's rounds, and every rank's bytes sent and received, as `cost_model` says for
    its algorithm, N, length and dtype."""
    itemsize = getattr(torch, row["dtype"]).itemsize
    n, name = row["world_size"], row["algorithm"]
    expected = cost_model.bytes_per_rank(name, n, row["numel"], itemsize)
    return row["bytes"] == expected and row["rounds"] == cost_model.rounds(name, n)


def busiest_share(rows: list[dict], algorithm: str) -> dict[int, float]:
    """Per N, the bytes `algorithm`'s busiest rank sent over the message, on the longest
    int64 tensor of `rows`."""
    largest = max(r["numel"] for r in rows)
    return {
        r["world_size"]: max(sent for sent, _ in r["bytes"]) / (8 * largest)
        for r in rows
        if r["algorithm"] == algorithm and r["numel"] == largest and r["dtype"] == "int64"
    }


def on_floor(share: dict[int, float], numel: int) -> bool:
    """Every N's share on the floor, to one element per chunk: a length that N does not
    divide leaves chunks one element longer than others."""
    return all(abs(s - floor(n)) <= 2 * n / numel for n, s in share.items())


def equal_builtin(rows: list[dict]) -> Verdict:
    """Every row's result equal to `dist.all_reduce`'s (integers exactly, floats to
    rounding), and every rank holding the same bits."""
    names = list(dict.fromkeys(r["algorithm"] for r in rows))
    exact = all(r["max_abs_error"] == 0 for r in rows if r["dtype"] == "int64")
    return verdict(
        exact and all(r["equal"] and r["ranks_agree"] for r in rows),
        f"{', '.join(names[:-1])} and {names[-1]} each equal dist.all_reduce on every world "
        "size, length and dtype (integers exactly), and every rank holds the same bits"
        if len(names) > 1
        else f"{names[0]} equals dist.all_reduce on every world size, length and dtype "
        "(integers exactly), and every rank holds the same bits",
    )


def counted_as_formulas(rows: list[dict]) -> Verdict:
    """Every row's rounds and bytes as its formula says; the ring's busiest rank on the
    floor at every N; every other algorithm's above it from 4 ranks on (at 2 ranks a tree
    and a butterfly also send each rank's data once and receive the sum once)."""
    largest = max(r["numel"] for r in rows)
    shares = {a: busiest_share(rows, a) for a in dict.fromkeys(r["algorithm"] for r in rows)}
    others_above = all(
        s > floor(n) + 2 * n / largest
        for a, share in shares.items()
        if a != "ring"
        for n, s in share.items()
        if n >= 4
    )
    return verdict(
        all(map(matches_formula, rows)) and on_floor(shares.get("ring", {}), largest)
        and others_above,
        "every algorithm took the rounds and sent the bytes its formula says, and only the "
        "ring's busiest rank sends the floor 2(N-1)/N of the message: from 4 ranks on the "
        "others send more",
    )  # fmt: skip


def after_halving(traced: list) -> list[list]:
    """Each rank's tensor halfway through a traced run: after the halving rounds of
    halving-doubling (`runs.traced_run`'s rounds start with the input)."""
    return after_round(traced, len(traced[0].rounds) // 2)


def halving_doubling_holds(traced: list, rows: list[dict]) -> Verdict:
    """A traced run on 4 ranks of `rank + 1` (after the halving, rank r holds chunk r's sum
    10 and no other), and `rows` on every power-of-two N: equal to `dist.all_reduce`, rounds
    and bytes as the formulas say, the busiest rank on the floor. Prints each part that
    does not hold."""
    largest = max(r["numel"] for r in rows)
    parts = {
        "after the halving, rank r holds the sum of chunk r only": all(
            row[r] == 10 and row.count(10) == 1 for r, row in enumerate(after_halving(traced))
        ),
        "equal to dist.all_reduce": all(r["equal"] and r["ranks_agree"] for r in rows),
        "rounds and bytes as the formulas say": all(map(matches_formula, rows)),
        "busiest rank on the floor": on_floor(busiest_share(rows, "halving_doubling"), largest),
    }
    for part in (part for part, ok in parts.items() if not ok):
        print(f"not so: {part}")
    return verdict(
        all(parts.values()),
        "halving-doubling: after the halving rank r holds the full sum of chunk r only; it "
        "equals dist.all_reduce on every power-of-two N, length and dtype, in 2 log2 N "
        "rounds, and its busiest rank sends the ring's floor 2(N-1)/N",
    )
