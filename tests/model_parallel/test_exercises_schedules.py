"""The schedule exercises' checkers accept the reference solutions (notebooks/solutions/
06_pipeline.py, which notebook 06's exercises 4 and 5 ask for) and name each classic mistake."""

from __future__ import annotations

import pytest
from reference import load_solution

from course_utils.model_parallel.exercises import (
    check_interleaved_order,
    check_split_backward,
)
from course_utils.model_parallel.schedules import one_f_one_b_order

SOLUTION = load_solution("06_pipeline.py")
interleaved_reference = SOLUTION.interleaved_order
split_reference = SOLUTION.split_backward


def _line(capsys) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_reference_solutions_pass(capsys):
    assert check_interleaved_order(interleaved_reference)
    assert _line(capsys).startswith("✓ interleaved_order")
    assert check_split_backward(split_reference)
    assert _line(capsys).startswith("✓ split_backward")


def test_deferring_every_w_to_the_end_is_a_split_too(capsys):
    def deferred(order):
        return [*order, *(("W", i) for k, i in order if k == "B"), ("step",)]

    assert check_split_backward(deferred)


def unsolved(*args):
    raise NotImplementedError


@pytest.mark.parametrize("checker", [check_interleaved_order, check_split_backward])
def test_unsolved_says_so(capsys, checker):
    for fn in (unsolved, lambda *a: None):
        assert not checker(fn)
        assert _line(capsys) == "✗ not solved yet"


def test_chunk_by_chunk_is_caught_as_not_interleaved(capsys):
    def looped(rank, stages, microbatches, chunks):  # all of chunk 0, then all of chunk 1
        forwards = [("F", i, c) for c in range(chunks) for i in range(microbatches)]
        return forwards + [
            ("B", i, c) for c in reversed(range(chunks)) for i in range(microbatches)
        ]

    assert not check_interleaved_order(looped)
    assert "running every forward first is GPipe's memory" in _line(capsys)


def test_a_virtual_stage_out_of_order_is_caught(capsys):
    def chunk_swapped(rank, stages, microbatches, chunks):
        return [
            (k, i, chunks - 1 - c if k == "F" else c)
            for k, i, c in interleaved_reference(rank, stages, microbatches, chunks)
        ]

    assert not check_interleaved_order(chunk_swapped)
    assert "virtual stages out of order" in _line(capsys)


def test_a_warm_up_too_short_is_caught(capsys):
    def plain_1f1b_warmup(rank, stages, microbatches, chunks):
        ops = interleaved_reference(rank, stages, microbatches, chunks)
        forwards = [op for op in ops if op[0] == "F"]
        backwards = [op for op in ops if op[0] == "B"]
        warm = stages - 1 - rank  # 1F1B's warm-up, too short for chunks
        out = forwards[:warm]
        for f, b in zip(forwards[warm:], backwards, strict=False):
            out += [f, b]
        return out + backwards[len(forwards) - warm :]

    assert not check_interleaved_order(plain_1f1b_warmup)
    assert "a warm-up too short" in _line(capsys)


def test_ops_without_their_chunk_are_caught(capsys):
    assert not check_interleaved_order(lambda r, k, m, v: one_f_one_b_order(r, k, m))
    assert "without its chunk" in _line(capsys)


def test_a_w_before_its_b_is_caught(capsys):
    def w_first(order):
        ops = []
        for kind, i in order:
            ops += [("W", i), (kind, i)] if kind == "B" else [(kind, i)]
        return [*ops, ("step",)]

    assert not check_split_backward(w_first)
    assert "W0 comes before B0" in _line(capsys)


def test_a_w_after_the_optimizer_step_is_caught(capsys):
    def late(order):
        ops = split_reference(order)[:-1]
        last_w = max(n for n, op in enumerate(ops) if op[0] == "W")
        return [*ops[:last_w], ("step",), ops[last_w]]

    assert not check_split_backward(late)
    assert "after the optimizer step" in _line(capsys)


def test_a_missing_step_or_w_is_caught(capsys):
    assert not check_split_backward(lambda order: split_reference(order)[:-1])
    assert 'optimizer step ("step",) once, not 0 times' in _line(capsys)
    assert not check_split_backward(lambda order: [*order, ("step",)])
    assert "never runs a W" in _line(capsys)
    assert not check_split_backward(
        lambda order: [op for op in split_reference(order) if op != ("W", 1)]
    )
    assert "never runs W1" in _line(capsys)


def test_moving_the_forwards_is_caught(capsys):
    def reordered(order):
        forwards = [op for op in order if op[0] == "F"]
        rest = [op for op in order if op[0] != "F"]
        return split_reference(forwards + rest)

    assert not check_split_backward(reordered)
    assert "keep 1F1B's order" in _line(capsys)


def test_a_function_that_raises_is_reported_not_raised(capsys):
    assert not check_split_backward(lambda order: 1 / 0)
    assert "split_backward raised ZeroDivisionError" in _line(capsys)
    assert not check_interleaved_order(lambda *a: 1 / 0)
    assert "interleaved_order raised ZeroDivisionError" in _line(capsys)


def test_rounds_of_one_micro_batch_are_caught_by_their_bubble(capsys):
    def one_at_a_time(rank, stages, microbatches, chunks):
        return _rounds_of(1, rank, stages, microbatches, chunks)

    assert not check_interleaved_order(one_at_a_time)
    assert "send a round of micro-batches through chunk 0" in _line(capsys)


def _rounds_of(per_round, rank, stages, microbatches, chunks):
    total = chunks * microbatches
    warmup = min((chunks - 1) * per_round + 2 * (stages - 1 - rank), total)
    count = {"F": [0] * chunks, "B": [0] * chunks}
    ops = []

    def op(kind, n):
        step = (n // per_round) % chunks
        c = step if kind == "F" else chunks - 1 - step
        ops.append((kind, count[kind][c], c))
        count[kind][c] += 1

    for n in range(warmup):
        op("F", n)
    for n in range(total - warmup):
        op("F", warmup + n)
        op("B", n)
    for n in range(total - warmup, total):
        op("B", n)
    return ops


def test_the_course_s_own_interleaved_order_is_refused(capsys):
    from course_utils.core.own_answers import message
    from course_utils.model_parallel.schedules import interleaved_order

    assert not check_interleaved_order(interleaved_order)
    assert not check_interleaved_order(lambda r, k, m, v: interleaved_order(r, k, m, v))
    assert capsys.readouterr().out.count(message("interleaved_order")) == 2
