"""Checkers for notebook 06: predict the bubble; write GPipe's order of operations for a stage.

Each checker tries the learner's function on a few pipelines, prints one verdict line
and returns whether it passed; it never raises at the learner.
"""

from __future__ import annotations

from ..core.checks import NOT_SOLVED, verdict
from ..core.own_answers import (
    Refused,
    attempt_refusing,
    message,
    own_answer_name,
)  # fmt: skip
from .schedules import BACKWARD, FORWARD, bubble_formula, check_order, simulate

BUBBLE_CASES = ((3, 11), (3, 3), (5, 9), (6, 7), (8, 8), (8, 64))  # none whose value 06 prints
ORDER_CASES = ((2, 2), (3, 3), (4, 8), (5, 3))


def answer_values() -> dict[str, list]:
    """The bubble's cases and answers (`course.revealed`: none may appear above it)."""
    return {"bubble": [(case, bubble_formula(*case)) for case in BUBBLE_CASES]}


def answer_phrases() -> dict[str, list]:
    """The bubble's formula as a text would write it (`course.revealed`)."""
    return {"bubble": ["(K-1)/(M+K-1)", "(K-1)/(K+M-1)", "(K-1)/(K-1+M)", "1-M/(M+K-1)"]}


def check_bubble(predict_bubble) -> bool:
    """`predict_bubble(stages, microbatches)` must give GPipe's idle fraction of a step, on
    pipelines of several sizes (a value typed in for one of them fails at the next)."""
    if own_answer_name(predict_bubble):
        return verdict(False, message(own_answer_name(predict_bubble)))
    seen = []
    for stages, microbatches in BUBBLE_CASES:
        try:
            value = attempt_refusing(predict_bubble, stages, microbatches)
        except Exception as exc:
            return verdict(False, f"predict_bubble raised {type(exc).__name__}: {exc}")
        if isinstance(value, Refused):
            return verdict(False, value)
        if value is NOT_SOLVED:
            return verdict(False, NOT_SOLVED)
        try:
            value = float(value)
        except (TypeError, ValueError):
            return verdict(False, f"predict_bubble should return a fraction, got {value!r}")
        want, seen = bubble_formula(stages, microbatches), [*seen, value]
        if abs(value - want) > 1e-6 and len(seen) > 1 and all(v == seen[0] for v in seen):
            return verdict(
                False,
                f"you predict {value:.3f} for every pipeline: the bubble depends on the K "
                f"stages and the M micro-batches, write it as a formula of both",
            )
        if abs(value - want) > 1e-6:
            return verdict(
                False,
                f"for K={stages} stages and M={microbatches} micro-batches you predict "
                f"{value:.3f}; each stage idles K-1 of the M+K-1 slots of a forward pass "
                f"(the backward pass mirrors it)",
            )
    return verdict(True, "predict_bubble gives GPipe's bubble for every pipeline tried")


def _order_problem(gpipe_order, stages: int, microbatches: int):
    """The first thing wrong with the learner's orders for this pipeline (NOT_SOLVED for the
    stub), else None."""
    orders = []
    for stage in range(stages):
        order = attempt_refusing(gpipe_order, stage, stages, microbatches)
        if isinstance(order, Refused):
            return str(order)
        if order is NOT_SOLVED:
            return NOT_SOLVED
        try:
            ops = check_order(order, microbatches, stage)
        except ValueError as error:
            return f"K={stages}, M={microbatches}: {error}"
        kinds = [kind for kind, _ in ops]
        if kinds != [FORWARD] * microbatches + [BACKWARD] * microbatches:
            return (
                f"K={stages}, M={microbatches}: stage {stage} starts a backward before its "
                f"last forward; GPipe runs every forward first (interleaving is 1F1B)"
            )
        if [i for _, i in ops[:microbatches]] != list(range(microbatches)):
            return f"K={stages}, M={microbatches}: stage {stage} should run F0, F1, ... in order"
        orders.append(ops)
    try:
        timeline = simulate("gpipe", stages, microbatches, orders=orders)
    except ValueError as error:
        return f"K={stages}, M={microbatches}: {error}"
    if timeline.makespan() > 2 * (microbatches + stages - 1) + 1e-9:
        return (
            f"K={stages}, M={microbatches}: the step takes {timeline.makespan():.0f} slots "
            f"instead of {2 * (microbatches + stages - 1)}; every stage should take its "
            f"backwards in the same order"
        )
    return None


def check_gpipe_order(gpipe_order) -> bool:
    """`gpipe_order(stage, stages, microbatches)` must list ("F", i) / ("B", i) as GPipe runs."""
    if own_answer_name(gpipe_order):
        return verdict(False, message(own_answer_name(gpipe_order)))
    for stages, microbatches in ORDER_CASES:
        try:
            problem = _order_problem(gpipe_order, stages, microbatches)
        except Exception as error:
            return verdict(False, f"gpipe_order raised {type(error).__name__}: {error}")
        if problem:
            return verdict(False, problem)
    return verdict(True, "gpipe_order runs a full GPipe step on every pipeline tried")
