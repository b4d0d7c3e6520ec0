"""Refuse a schedule that could not train, saying why, before a single op runs.

A rank's order must run each (micro-batch, chunk) forward once, then its backward once, and,
when the backward is split, its weight gradient once after that backward. Across chunks on one
rank, the forward of micro-batch i on chunk c + 1 needs chunk c's (the activation passes
through every other rank in between), and backwards go the other way. What a rank hands on
is checked from the messages it sent: each activation and each gradient exactly once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ..parallel.pipeline import BACKWARD, FORWARD, WEIGHT

KINDS = (FORWARD, BACKWARD, WEIGHT)
Op = tuple[str, int, int]  # (kind, micro-batch, chunk)


def name(op: Op) -> str:
    kind, i, chunk = op
    return f"{kind}{i}" + (f" of chunk {chunk}" if chunk else "")


def check_rank_order(order, microbatches: int, chunks: int = 1, rank: int = 0) -> list[Op]:
    """The rank's ops as (kind, i, chunk), or ValueError naming the first thing wrong.

    Ops may be written (kind, i) when there is one chunk."""
    if not isinstance(order, (list, tuple)):
        raise ValueError(f"rank {rank}: an order is a list of ops, got {type(order).__name__}.")
    ops: list[Op] = []
    for op in order:
        if not isinstance(op, (tuple, list)) or len(op) not in (2, 3) or op[0] not in KINDS:
            raise ValueError(f'rank {rank}: {op!r} is not an op like ("F", 0, 1) or ("W", 0).')
        kind, i, chunk = op[0], int(op[1]), int(op[2]) if len(op) == 3 else 0
        if not 0 <= i < microbatches:
            raise ValueError(f"rank {rank}: micro-batch {i} is outside 0..{microbatches - 1}.")
        if not 0 <= chunk < chunks:
            raise ValueError(f"rank {rank}: chunk {chunk} is outside 0..{chunks - 1}.")
        ops.append((kind, i, chunk))
    split = any(kind == WEIGHT for kind, _, _ in ops)
    seen: set[Op] = set()
    for op in ops:
        kind, i, c = op
        if op in seen:
            what = (
                "its weight gradient would be added twice"
                if kind == WEIGHT
                else ("its result would be handed on twice")
            )
            raise ValueError(f"rank {rank}: {name(op)} appears twice: {what}.")
        if kind == BACKWARD and (FORWARD, i, c) not in seen:
            raise ValueError(
                f"rank {rank}: {name(op)} comes before {name((FORWARD, i, c))}, whose "
                "activations it needs."
            )
        if kind == WEIGHT and (BACKWARD, i, c) not in seen:
            raise ValueError(
                f"rank {rank}: {name(op)} comes before {name((BACKWARD, i, c))}: a weight "
                "gradient needs the output gradient that its B receives."
            )
        if kind == FORWARD and c > 0 and (FORWARD, i, c - 1) not in seen:
            raise ValueError(
                f"rank {rank}: virtual stages out of order: {name(op)} runs before "
                f"{name((FORWARD, i, c - 1))}, which makes (through the other ranks) the "
                "activation it needs."
            )
        if kind == BACKWARD and c < chunks - 1 and (BACKWARD, i, c + 1) not in seen:
            raise ValueError(
                f"rank {rank}: virtual stages out of order: {name(op)} runs before "
                f"{name((BACKWARD, i, c + 1))}, which makes (through the other ranks) the "
                "gradient it needs."
            )
        seen.add(op)
    wanted = (FORWARD, BACKWARD, WEIGHT) if split else (FORWARD, BACKWARD)
    missing = [
        name((k, i, c))
        for c in range(chunks)
        for i in range(microbatches)
        for k in wanted
        if (k, i, c) not in seen
    ]
    if missing:
        raise ValueError(f"rank {rank}: the order never runs {', '.join(missing[:4])}.")
    return ops


def check_orders(orders, stages: int, microbatches: int, chunks: int = 1) -> list[list[Op]]:
    """Every rank's order checked (`check_rank_order`); all ranks split the backward or none."""
    if len(orders) != stages:
        raise ValueError(f"{len(orders)} orders for {stages} ranks: one order per rank.")
    checked = [check_rank_order(o, microbatches, chunks, r) for r, o in enumerate(orders)]
    splits = {any(k == WEIGHT for k, _, _ in o) for o in checked}
    if len(splits) > 1:
        raise ValueError("some ranks split the backward into B and W and some do not: all or none.")
    return checked


def expected_handoffs(
    stages: int, microbatches: int, chunks: int = 1
) -> list[tuple[str, int, int]]:
    """Every message of one step as (kind, micro-batch, global stage that sent it)."""
    last = stages * chunks - 1
    forward = [(FORWARD, i, g) for i in range(microbatches) for g in range(last)]
    return forward + [(BACKWARD, i, g) for i in range(microbatches) for g in range(1, last + 1)]


def check_handoffs(
    sent: Iterable[tuple[int, int]], stages: int, microbatches: int, chunks: int = 1
) -> None:
    """Refuse a step whose ranks sent a hand-off twice, or never: `sent` lists each message
    as the recorder saw it, (the rank it came from, the rank it went to)."""
    want: Counter = Counter()
    for kind, _, g in expected_handoffs(stages, microbatches, chunks):
        to = g + 1 if kind == FORWARD else g - 1
        want[g % stages, to % stages] += 1
    got = Counter(tuple(m) for m in sent)
    for a, b in sorted(set(want) | set(got)):
        if got[a, b] != want[a, b]:
            raise ValueError(
                f"rank {a} sent {got[a, b]} hand-offs to rank {b} in one step; the schedule "
                f"has {want[a, b]}: each result is handed on once, or a receiver takes a "
                "stale copy or waits forever."
            )
