"""Play a schedule out on paper: every pipeline schedule, with or without measured times.

Each rank runs its ops in order, an op starts once the rank is free and what it needs has
arrived, and a result leaves over the rank's one link. What comes back is a `Timeline`, so
the bubble of a schedule on paper, and that of the same schedule played out with the ops
and hand-offs a run measured, read the same way as the measured one. `play_out` takes any
schedule's ops as (kind, micro-batch, chunk); `simulate` is the same play-out in a stage's
terms, for the one-chunk schedules (naive, GPipe, 1F1B) with an unsplit backward.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .schedule_check import check_orders, name
from .schedules import (
    BACKWARD,
    FORWARD,
    WEIGHT,
    Plan,
    check_order,
    lifted,
    one_chunk,
    peak_held,
    plan,
)
from .timeline import WAIT, Event, Timeline

Key = tuple[int, str, int, int]  # (rank, kind, micro-batch, chunk)


def _piece(rank: int, chunk: int, stages: int, chunks: int, step: int) -> tuple[int, int] | None:
    """(rank, chunk) of the piece `step` places after this one in the model, if there is one."""
    g = chunk * stages + rank + step
    return (g % stages, g // stages) if 0 <= g < stages * chunks else None


def source(rank: int, kind: str, chunk: int, stages: int, chunks: int) -> tuple[int, int] | None:
    """(rank, chunk) whose result this op waits for, or None (the first forward, the last
    backward, a W: each needs only what this rank made)."""
    step = {FORWARD: -1, BACKWARD: 1}.get(kind)
    return None if step is None else _piece(rank, chunk, stages, chunks, step)


def destination(rank: int, kind: str, chunk: int, stages: int, chunks: int):
    """(rank, chunk) this op's result goes to, or None (the last forward: the loss is here;
    the first backward: the input needs no gradient; a W: nothing leaves)."""
    step = {FORWARD: 1, BACKWARD: -1}.get(kind)
    return None if step is None else _piece(rank, chunk, stages, chunks, step)


@dataclass(frozen=True)
class Costs:
    """What an op costs on paper, in slots (one forward) or seconds. `backward` and `weight`
    are the two parts of a backward: a schedule that splits it runs them as B and W, one that
    does not runs a B of `backward + weight`. `handoff`: each message between ranks."""

    forward: float = 1.0
    backward: float = 1.0
    weight: float = 1.0
    handoff: float = 0.0


def play_out(
    schedule: str | Plan,
    stages: int,
    microbatches: int,
    *,
    chunks: int = 2,
    costs: Costs = Costs(),
    per_op: Mapping[Key, float] | None = None,
    orders: list[list] | None = None,
    posting: Mapping[Key, float] | None = None,
) -> Timeline:
    """The schedule's step with ops of fixed length (`costs`), or each op's own (`per_op`, by
    (rank, kind, micro-batch, chunk) as `Timeline.op_durations` gives), and `costs.handoff`
    per message. A chunk is a piece of the stage: with v chunks an op costs 1/v of the
    stage's (the model is the same, cut finer).
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
    backward = costs.backward if split else costs.backward + costs.weight
    cost = {FORWARD: costs.forward, BACKWARD: backward, WEIGHT: costs.weight}
    if per_op is not None:
        ops = [(r, op) for r, o in enumerate(orders) for op in o]
        missing = [f"rank {r} {name(op)}" for r, op in ops if (r, *op) not in per_op]
        if missing:
            raise ValueError(f"per_op has no duration for {', '.join(missing[:3])}.")
    sent: dict[tuple[str, int, int, int], float] = {}  # (kind, i, rank, chunk) -> arrival
    held: list[list] = [[] for _ in range(stages)]  # results not yet passed on (hold_sends)
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
                events.append(Event(r, kind, i, start, busy_until, c))
                free[r], pos[r], progress = busy_until, pos[r] + 1, True
                held[r].append((kind, i, c))
                following = orders[r][pos[r]][0] if pos[r] < len(orders[r]) else None
                if sched.hold_sends and following == kind:
                    continue  # naive: the whole batch is passed on at once
                for k, j, cc in held[r]:
                    goes = destination(r, k, cc, stages, v)
                    if goes is not None and goes[0] != r:  # over the link, one after another
                        wire[r] = max(wire[r], end) + costs.handoff
                        sent[(k, j, r, cc)] = wire[r]
                    else:
                        sent[(k, j, r, cc)] = end
                held[r].clear()
    stuck = [r for r in range(stages) if pos[r] < len(orders[r])]
    if stuck:
        at = ", ".join(f"rank {r} at {name(orders[r][pos[r]])}" for r in stuck)
        raise ValueError(f"deadlock: these ranks wait for each other forever ({at}).")
    return Timeline(
        sched.name,
        stages,
        microbatches,
        sorted(events, key=lambda e: (e.stage, e.start)),
        slot=costs.forward / v,
        peak_activations=tuple(peak_held(o) for o in orders),
    )


def simulate(
    schedule: str | Plan,
    stages: int,
    microbatches: int,
    *,
    costs: Costs = Costs(),
    stage_cost: Sequence[float] | None = None,
    durations: Sequence[tuple[float, float]] | None = None,
    orders: list[list] | None = None,
    per_op: Mapping[Key, float] | None = None,
) -> Timeline:
    """`play_out` of a one-chunk schedule (naive, GPipe, 1F1B) whose backward is one op, in a
    stage's terms: a forward of `costs.forward` and a backward of `costs.backward`, times
    `stage_cost[s]` on stage s (2 = a stage twice as heavy); or each stage's (forward,
    backward) seconds, `durations` (measured ones); or each op's own, `per_op`. `orders` are
    ("F", i) and ("B", i) ops per stage: how a learner's order is tried."""
    one_chunk(schedule)
    stage_cost = tuple(stage_cost or (1.0,) * stages)
    if len(stage_cost) != stages:
        raise ValueError(f"stage_cost has {len(stage_cost)} entries for {stages} stages.")
    if durations is None:
        durations = [(costs.forward * c, costs.backward * c) for c in stage_cost]
    elif len(durations) != stages:
        raise ValueError(f"durations has {len(durations)} entries for {stages} stages.")
    if orders is not None:
        orders = [lifted(check_order(o, microbatches, s)) for s, o in enumerate(orders)]
    if per_op is None:
        per_op = {
            (s, kind, i, 0): durations[s][kind == BACKWARD]
            for s in range(stages)
            for kind in (FORWARD, BACKWARD)
            for i in range(microbatches)
        }
    paper = Costs(forward=costs.forward, handoff=costs.handoff)
    return play_out(
        schedule, stages, microbatches, chunks=1, costs=paper, per_op=per_op, orders=orders
    )


def posting_seconds(tl: Timeline) -> dict[Key, float]:
    """By op, the time its rank spent after it, before its next op or wait: the CPU time of
    handing its result on (a measured step counts it as busy, `Timeline.idle`)."""
    after = {}
    for r in range(tl.stages):
        mine = sorted((e for e in tl.events if e.stage == r), key=lambda e: e.start)
        for e, following in zip(mine, mine[1:], strict=False):
            if e.kind != WAIT:
                key = (e.stage, e.kind, e.microbatch, e.chunk)
                after[key] = max(0.0, following.start - e.end)
    return after


def handoff_seconds(tl: Timeline, chunks: int) -> list[float]:
    """How long each hand-off took that its receiver was already waiting for: from the end of
    the op that made it (on the other rank) to the end of the wait before the op that took it.
    A hand-off that landed before its receiver asked shows no time, so it is left out."""
    ends = {(e.stage, e.kind, e.microbatch, e.chunk): e.end for e in tl.compute()}
    seconds = []
    for r in range(tl.stages):
        mine = [e for e in tl.events if e.stage == r]
        for wait, op in zip(mine, mine[1:], strict=False):
            if wait.kind != WAIT or op.kind == WAIT:
                continue
            needs = source(r, op.kind, op.chunk, tl.stages, chunks)
            sent = ends.get((needs[0], op.kind, op.microbatch, needs[1])) if needs else None
            if sent is not None and wait.start <= sent:
                seconds.append(wait.end - sent)
    return seconds
