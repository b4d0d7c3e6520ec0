"""Checker for notebook 11's pipeline exercise: where to cut the layers into stages.

The learner writes `stage_boundaries(layer_seconds, stages)`: the layers, in order, split
into `stages` consecutive stages, returned as the index of the first layer of every stage
after the first. A pipeline runs at the pace of its slowest stage (chapter 06), so a cut
is right when its slowest stage takes no longer than the best cut's. The checker finds
that best time by trying every cut (the cases are small), accepts any cut that reaches
it, and names the classic mistakes: the same number of layers on every stage whatever
they cost, each stage filled up to the average cost and the rest left to the last one,
and the boundaries given as the last layer of each stage instead of the first of the next.
"""

from __future__ import annotations

import itertools
import math

from ..core.own_answers import answer, first_problem_verdict
from .mesh3d import stage_blocks

# (seconds per layer, stages), each with one best cut: a dear head, then uneven blocks,
# where both classic mistakes (and a boundary off by one) miss the best time
CASES = [
    ([1.5] * 7 + [10.5], 2),
    ([1.25, 1.25, 1.25, 3.75, 1.25, 1.25, 3.75, 1.25, 1.25, 1.25], 4),
    ([1.5, 4.5, 1.5, 4.5, 6.0, 1.5, 1.5, 4.5, 1.5, 1.5], 3),
]


def slowest_stage(layer_seconds: list[float], boundaries: list[int]) -> float:
    """The seconds of the slowest stage when each boundary starts a new stage."""
    edges = [0, *boundaries, len(layer_seconds)]
    return max(sum(layer_seconds[a:b]) for a, b in itertools.pairwise(edges))


def _best(layer_seconds, stages) -> float:
    cuts = itertools.combinations(range(1, len(layer_seconds)), stages - 1)
    return min(slowest_stage(layer_seconds, list(cut)) for cut in cuts)


def answer_values() -> dict[str, list]:
    """The checker's cases and the best slowest stage (`course.revealed`: none may appear
    above the exercise)."""
    return {"stage_boundaries": [(case, _best(*case)) for case in CASES]}


def _equal_counts(layer_seconds, stages) -> list[int]:
    """The even cut `mesh3d` makes of its blocks, whatever they cost."""
    return [stage_blocks(len(layer_seconds), s, stages).start for s in range(1, stages)]


def _filled_to_average(layer_seconds, stages) -> list[int]:
    target, total, cuts = sum(layer_seconds) / stages, 0.0, []
    for i, seconds in enumerate(layer_seconds):
        if total + seconds > target and total > 0 and len(cuts) < stages - 1:
            cuts.append(i)
            total = 0.0
        total += seconds
    return cuts


MISTAKES = {
    "every stage got the same number of layers: a pipeline runs at its slowest stage's pace, "
    "so cut where the seconds balance, not the layer counts": _equal_counts,
    "you filled each stage up to the average and left the rest to the last one: a layer "
    "that overshoots the average may still belong to the stage before it": _filled_to_average,
}


def _problem(fn, layer_seconds, stages):
    got = answer(fn, list(layer_seconds), stages)
    n = len(layer_seconds)
    if not isinstance(got, list | tuple) or not all(isinstance(i, int) for i in got):
        return "stage_boundaries must return a list of layer indices (ints)"
    got = list(got)
    if len(got) != stages - 1:
        return f"{stages} stages need {stages - 1} boundaries; you returned {len(got)}"
    if any(not 0 < i < n for i in got) or got != sorted(set(got)):
        return (
            f"the boundaries must increase and lie between 1 and {n - 1} (each starts a "
            f"stage of at least one layer); you returned {got}"
        )
    best, mine = _best(layer_seconds, stages), slowest_stage(layer_seconds, got)
    if math.isclose(mine, best):
        return None
    shifted = [i + 1 for i in got]
    if all(i < n for i in shifted) and math.isclose(slowest_stage(layer_seconds, shifted), best):
        return (
            "each boundary is the last layer of a stage: return the index of the first layer "
            "of the next stage (boundaries [b] mean layers [0, b) and [b, n))"
        )
    for mistake, cut in MISTAKES.items():
        if got == cut(layer_seconds, stages):
            return mistake
    return (
        f"for {stages} stages of layers taking {layer_seconds} s: your slowest stage takes "
        f"{mine:g} s, but a cut exists whose slowest stage takes {best:g} s"
    )


def check_stage_boundaries(fn):
    """✓ when `fn`'s cut is as fast as the best one for every case in `CASES`."""
    return first_problem_verdict(
        fn,
        "stage_boundaries",
        lambda layer_seconds, stages: _problem(fn, layer_seconds, stages),
        CASES,
        "your cut's slowest stage is as fast as the best cut's at every case: the seconds, "
        "not the layer counts, set where a pipeline's stages begin",
    )
