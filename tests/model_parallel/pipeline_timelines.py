"""What every measured pipeline timeline must be, whatever the machine's speed or load."""

from __future__ import annotations

from itertools import pairwise

from course_utils.model_parallel.schedules import plan
from course_utils.model_parallel.timeline import Timeline

EPS = 1e-9  # seconds: event times are differences of clock readings near 1e5 s


def assert_well_formed(tl: Timeline, handoff: float = 0.0) -> None:
    """Every stage runs its M forwards and M backwards in its schedule's order, one at a
    time, each after the hand-off it needs has crossed the link (`handoff` seconds, on a
    clock all the stages share): facts of the code, not of the machine's speed."""
    order = plan(tl.schedule, 1).order
    ops = {(e.stage, e.kind, e.microbatch): e for e in tl.compute()}
    for s in range(tl.stages):
        mine = sorted(tl.compute(s), key=lambda e: e.start)
        assert [(e.kind, e.microbatch, e.chunk) for e in mine] == order(
            s, tl.stages, tl.microbatches
        )
        assert all(-EPS <= e.start < e.end for e in mine)
        assert all(a.end <= b.start + EPS for a, b in pairwise(mine))  # one op at a time
    for s in range(1, tl.stages):
        for i in range(tl.microbatches):
            assert ops[s, "F", i].start >= ops[s - 1, "F", i].end + handoff - EPS
            assert ops[s - 1, "B", i].start >= ops[s, "B", i].end + handoff - EPS
    assert 0 < tl.bubble_fraction() < 1
