"""Play a schedule of (kind, micro-batch, chunk) ops out on paper, with or without measured times.

Like `schedules.simulate`, for schedules with virtual stages and a split backward: each rank
runs its ops in order, an op starts once the rank is free and what it needs has arrived, and
a result leaves over the rank's one link. What comes back is a `Timeline` (events carry
their chunk), so the bubble of a schedule on paper, and that of the same schedule played
out with the ops and hand-offs a run measured, read the same way as the measured one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .schedule_check import check_orders
from .schedules import WAIT, Event, Timeline, peak_held
from .virtual_schedules import BACKWARD, FORWARD, WEIGHT, Plan, plan

Key = tuple[int, str, int, int]  # (rank, kind, micro-batch, chunk)


@dataclass(frozen=True)
class ChunkEvent(Event):
    chunk: int = 0


def source(rank: int, kind: str, chunk: int, stages: int, chunks: int) -> tuple[int, int] | None:
    """(rank, chunk) whose result this op waits for, or None (the first forward, the last
    backward, a W: each needs only what this rank made)."""
    g, last = chunk * stages + rank, stages * chunks - 1
    if kind == FORWARD and g > 0:
        return (g - 1) % stages, (g - 1) // stages
    if kind == BACKWARD and g < last:
        return (g + 1) % stages, (g + 1) // stages
    return None


def play_out(
    schedule: str | Plan,
    stages: int,
    microbatches: int,
    *,
    chunks: int = 2,
    forward: float = 1.0,
    backward: float = 1.0,
    weight: float = 1.0,
    per_op: Mapping[Key, float] | None = None,
    handoff: float = 0.0,
    orders: list[list] | None = None,
    posting: Mapping[Key, float] | None = None,
) -> Timeline:
    """The schedule's step with ops of fixed length, or each op's own (`per_op`, by (rank,
    kind, micro-batch, chunk) as `op_durations` gives), and `handoff` seconds per message.

    `backward` and `weight` are the two parts of a backward: a schedule that splits it runs
    them as B and W, one that does not runs a B of `backward + weight`. A chunk is a piece of
    the stage: with v chunks an op costs 1/v of the stage's (the model is the same, cut finer).
    `orders` tries other orders (a learner's); one whose ranks wait for each other forever
    raises ValueError naming where each rank is stuck. `posting` (by the same keys, as
    `posting_seconds` gives) is the time a measured rank spent after an op handing its result
    on: it keeps the rank busy, as a measured step counts it, but the result leaves when the
    op's compute ends."""
    sched = plan(schedule, chunks)
    v = sched.chunks
    if orders is None:
        orders = sched.orders(stages, microbatches)
    orders = check_orders(orders, stages, microbatches, v)
    split = any(k == WEIGHT for o in orders for k, _, _ in o)
    cost = {FORWARD: forward, BACKWARD: backward if split else backward + weight, WEIGHT: weight}
    if per_op is not None:
        missing = [(r, *op) for r, o in enumerate(orders) for op in o if (r, *op) not in per_op]
        if missing:
            raise ValueError(f"per_op has no duration for {missing[:3]}.")
    sent: dict[tuple[str, int, int, int], float] = {}  # (kind, i, rank, chunk) -> arrival
    pos, free, wire, events = [0] * stages, [0.0] * stages, [0.0] * stages, []
    progress = True
    while progress:
        progress = False
        for r in range(stages):
            while pos[r] < len(orders[r]):
                kind, i, c = orders[r][pos[r]]
                needs = source(r, kind, c, stages, v)
                if needs is not None and (kind, i, *needs) not in sent:
                    break
                start = max(free[r], sent[(kind, i, *needs)] if needs else 0.0)
                seconds = per_op[(r, kind, i, c)] if per_op is not None else cost[kind] / v
                end = start + seconds
                busy_until = end + (posting or {}).get((r, kind, i, c), 0.0)
                events.append(ChunkEvent(r, kind, i, start, busy_until, chunk=c))
                free[r], pos[r], progress = busy_until, pos[r] + 1, True
                if kind != WEIGHT:
                    crosses = stages > 1 and source(r, kind, c, stages, v) != (r, c)
                    if crosses:
                        wire[r] = max(wire[r], end) + handoff
                    sent[(kind, i, r, c)] = max(wire[r], end) if crosses else end
    stuck = [r for r in range(stages) if pos[r] < len(orders[r])]
    if stuck:
        at = ", ".join(f"rank {r} at {orders[r][pos[r]]}" for r in stuck)
        raise ValueError(f"deadlock: these ranks wait for each other forever ({at}).")
    return Timeline(
        sched.name,
        stages,
        microbatches,
        sorted(events, key=lambda e: (e.stage, e.start)),
        slot=forward / v,
        peak_activations=tuple(peak_held(o) for o in orders),
    )


def op_durations(tl: Timeline) -> dict[Key, float]:
    """Every op's own duration, by (rank, kind, micro-batch, chunk), for `play_out(per_op=)`."""
    return {
        (e.stage, e.kind, e.microbatch, getattr(e, "chunk", 0)): e.end - e.start
        for e in tl.compute()
    }


def posting_seconds(tl: Timeline) -> dict[Key, float]:
    """By op, the time its rank spent after it, before its next op or wait: the CPU time of
    handing its result on (a measured step counts it as busy, `Timeline.idle`)."""
    after = {}
    for r in range(tl.stages):
        mine = sorted((e for e in tl.events if e.stage == r), key=lambda e: e.start)
        for e, following in zip(mine, mine[1:], strict=False):
            if e.kind != WAIT:
                key = (e.stage, e.kind, e.microbatch, getattr(e, "chunk", 0))
                after[key] = max(0.0, following.start - e.end)
    return after


def handoff_seconds(tl: Timeline, chunks: int) -> list[float]:
    """How long each hand-off took that its receiver was already waiting for: from the end of
    the op that made it (on the other rank) to the end of the wait before the op that took it.
    A hand-off that landed before its receiver asked shows no time, so it is left out."""
    ends = {(e.stage, e.kind, e.microbatch, getattr(e, "chunk", 0)): e.end for e in tl.compute()}
    seconds = []
    for r in range(tl.stages):
        mine = [e for e in tl.events if e.stage == r]
        for wait, op in zip(mine, mine[1:], strict=False):
            if wait.kind != WAIT or op.kind == WAIT:
                continue
            needs = source(r, op.kind, getattr(op, "chunk", 0), tl.stages, chunks)
            sent = ends.get((needs[0], op.kind, op.microbatch, needs[1])) if needs else None
            if sent is not None and wait.start <= sent:
                seconds.append(wait.end - sent)
    return seconds
