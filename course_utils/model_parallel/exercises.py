"""Checkers for notebook 06: predict the bubble; write GPipe's order of operations for a
stage; past 1F1B, write interleaved 1F1B's order for a rank and split each backward of a
1F1B order into B and W.

Each checker tries the learner's function on a few pipelines, prints one verdict line
naming the first mistake it finds, and returns whether it passed; it never raises at the
learner.
"""

from __future__ import annotations

from ..core.own_answers import answer, first_problem_verdict
from .schedule_check import check_rank_order
from .schedule_play import peak_held, play_out, simulate
from .schedules import (
    BACKWARD,
    FORWARD,
    WEIGHT,
    bubble_formula,
    check_order,
    interleaved_bubble_formula,
    one_f_one_b_order,
)

BUBBLE_CASES = ((3, 11), (3, 3), (5, 9), (6, 7), (8, 8), (8, 64))  # none whose value 06 prints
ORDER_CASES = ((2, 2), (3, 3), (4, 8), (5, 3))
INTERLEAVED_CASES = ((2, 2, 2), (2, 4, 2), (4, 8, 2), (3, 6, 2), (2, 8, 3))  # K, M, v
SPLIT_CASES = ((2, 4), (4, 8), (3, 2))  # K, M
STEP = "step"
WARMUP = "a rank runs (v-1) rounds of forwards, plus 2 per rank after it, before its first backward"


def answer_values() -> dict[str, list]:
    """The bubble's cases and answers (`course.revealed`: none may appear above it)."""
    return {"bubble": [(case, bubble_formula(*case)) for case in BUBBLE_CASES]}


def answer_phrases() -> dict[str, list]:
    """The bubble's formula as a text would write it (`course.revealed`)."""
    return {"bubble": ["(K-1)/(M+K-1)", "(K-1)/(K+M-1)", "(K-1)/(K-1+M)", "1-M/(M+K-1)"]}


def check_bubble(predict_bubble) -> bool:
    """`predict_bubble(stages, microbatches)` must give GPipe's idle fraction of a step, on
    pipelines of several sizes (a value typed in for one of them fails at the next)."""
    seen = []

    def problem(stages, microbatches):
        value = answer(predict_bubble, stages, microbatches)
        try:
            value = float(value)
        except (TypeError, ValueError):
            return f"predict_bubble should return a fraction, got {value!r}"
        seen.append(value)
        if abs(value - bubble_formula(stages, microbatches)) <= 1e-6:
            return None
        if len(seen) > 1 and all(v == seen[0] for v in seen):
            return (
                f"you predict {value:.3f} for every pipeline: the bubble depends on the K "
                f"stages and the M micro-batches, write it as a formula of both"
            )
        return (
            f"for K={stages} stages and M={microbatches} micro-batches you predict "
            f"{value:.3f}; each stage idles K-1 of the M+K-1 slots of a forward pass "
            f"(the backward pass mirrors it)"
        )

    return first_problem_verdict(
        predict_bubble,
        "predict_bubble",
        problem,
        BUBBLE_CASES,
        "predict_bubble gives GPipe's bubble for every pipeline tried",
    )


def _order_problem(gpipe_order, stages: int, microbatches: int):
    """The first thing wrong with the learner's orders for this pipeline, else None."""
    orders = []
    for stage in range(stages):
        order = answer(gpipe_order, stage, stages, microbatches)
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
    return first_problem_verdict(
        gpipe_order,
        "gpipe_order",
        lambda *case: _order_problem(gpipe_order, *case),
        ORDER_CASES,
        "gpipe_order runs a full GPipe step on every pipeline tried",
    )


def _interleaved_problem(fn, stages: int, microbatches: int, chunks: int):
    case = f"K={stages}, M={microbatches}, v={chunks}"
    orders = []
    for rank in range(stages):
        order = answer(fn, rank, stages, microbatches, chunks)
        if any(isinstance(op, (tuple, list)) and len(op) == 2 for op in order):
            return f'{case}: rank {rank} writes an op without its chunk; write ("F", i, chunk)'
        try:
            orders.append(check_rank_order(order, microbatches, chunks, rank))
        except ValueError as error:
            hint = (
                " (a warm-up too short: " + WARMUP + ")" if "comes before F" in str(error) else ""
            )
            return f"{case}: {error}{hint}"
        most = min(
            (chunks - 1) * (microbatches // max(1, microbatches // stages))
            + 2 * (stages - 1 - rank)
            + 1,
            chunks * microbatches,
        )
        if peak_held(orders[-1]) > most:
            return (
                f"{case}: rank {rank} holds the activations of {peak_held(orders[-1])} chunk "
                f"micro-batches at once, interleaved 1F1B at most {most}: after the warm-up, "
                "alternate one forward and one backward (running every forward first is GPipe's "
                "memory)"
            )
    try:
        timeline = play_out("interleaved", stages, microbatches, chunks=chunks, orders=orders)
    except ValueError as error:
        return f"{case}: {error} A warm-up too short? {WARMUP}"
    want = interleaved_bubble_formula(stages, microbatches, chunks)
    if timeline.bubble_fraction() > want + 1e-9:
        return (
            f"{case}: your order idles {timeline.bubble_fraction():.0%} of the step on paper, "
            f"interleaved 1F1B {want:.0%}: send a round of micro-batches through chunk 0, then "
            "the same round through chunk 1, and alternate one forward, one backward when full"
        )
    return None


def check_interleaved_order(interleaved_order) -> bool:
    """`interleaved_order(rank, stages, microbatches, chunks)` lists ("F"|"B", i, chunk)."""
    return first_problem_verdict(
        interleaved_order,
        "interleaved_order",
        lambda *case: _interleaved_problem(interleaved_order, *case),
        INTERLEAVED_CASES,
        "interleaved_order gives a bubble of (K-1)/(v·M+K-1) on every pipeline",
    )


def _split_problem(fn, stages: int, microbatches: int):
    case = f"K={stages}, M={microbatches}"
    orders = []
    for stage in range(stages):
        given = one_f_one_b_order(stage, stages, microbatches)
        ops = [tuple(op) for op in answer(fn, list(given))]
        steps = [n for n, op in enumerate(ops) if op == (STEP,)]
        if len(steps) != 1:
            return (
                f'{case}: stage {stage} must take the optimizer step ("step",) once, not '
                f"{len(steps)} times"
            )
        late = [op for op in ops[steps[0] + 1 :] if op[0] == WEIGHT]
        if late:
            return (
                f"{case}: stage {stage} runs W{late[0][1]} after the optimizer step: its "
                "gradient would miss this step's update; run every W before the step"
            )
        work = [op for op in ops if op != (STEP,)]
        try:
            checked = check_rank_order(work, microbatches, 1, stage)
        except ValueError as error:
            return f"{case}: {error}"
        if not any(op[0] == WEIGHT for op in checked):
            return f"{case}: stage {stage} never runs a W: split each backward into B and W"
        if [op for op in work if op[0] != WEIGHT] != [(k, i) for k, i in given]:
            return f"{case}: stage {stage} moves its F or B ops: keep 1F1B's order, add the Ws"
        orders.append(checked)
    try:
        play_out("zb-h1", stages, microbatches, orders=orders)
    except ValueError as error:
        return f"{case}: {error}"
    return None


def check_split_backward(split_backward) -> bool:
    """`split_backward(order)` takes a stage's 1F1B order of ("F", i) and ("B", i) and returns
    it with a ("W", i) after each ("B", i) (B now the input gradient only) and ("step",),
    the optimizer step, once every W is done."""
    return first_problem_verdict(
        split_backward,
        "split_backward",
        lambda *case: _split_problem(split_backward, *case),
        SPLIT_CASES,
        "split_backward runs each W after its B and before the optimizer step",
    )
