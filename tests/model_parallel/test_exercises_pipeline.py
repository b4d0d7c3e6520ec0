"""Notebook 06's checkers accept the reference solutions and explain each classic mistake."""

from __future__ import annotations

import pytest
from reference import load_solution

from course_utils.model_parallel.exercises import check_bubble, check_gpipe_order
from course_utils.model_parallel.schedules import one_f_one_b_order


def _solution():
    return load_solution("06_pipeline.py")


def _line(capsys) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_reference_solutions_pass(capsys):
    assert check_bubble(_solution().predict_bubble)
    assert _line(capsys).startswith("✓ predict_bubble")
    assert check_gpipe_order(_solution().gpipe_order)
    assert _line(capsys).startswith("✓ gpipe_order")


def test_backwards_oldest_first_is_gpipe_too(capsys):
    def oldest_first(stage, stages, microbatches):
        return [("F", i) for i in range(microbatches)] + [("B", i) for i in range(microbatches)]

    assert check_gpipe_order(oldest_first)


def unsolved(*args):
    raise NotImplementedError


def returns_nothing(*args):
    pass


@pytest.mark.parametrize("checker", [check_bubble, check_gpipe_order])
def test_unsolved_says_so(capsys, checker):
    for fn in (unsolved, returns_nothing):
        assert not checker(fn)
        assert _line(capsys) == "✗ not solved yet"


@pytest.mark.parametrize(
    "wrong",
    [
        lambda k, m: (k - 1) / m,  # idle over busy, not over the whole step
        lambda k, m: (k - 1) / (m + k),  # one slot too many
        lambda k, m: k / (m + k - 1),  # counts the stage's own slot as idle
    ],
)
def test_wrong_bubble_formulas_are_caught(capsys, wrong):
    assert not check_bubble(wrong)
    assert "K-1 of the M+K-1 slots" in _line(capsys)


def test_a_bubble_that_is_not_a_number_is_caught(capsys):
    assert not check_bubble(lambda k, m: "a lot")
    assert "should return a fraction" in _line(capsys)


def test_interleaving_is_caught_as_1f1b(capsys):
    assert not check_gpipe_order(one_f_one_b_order)
    assert "interleaving is 1F1B" in _line(capsys)


def test_a_missing_microbatch_is_caught(capsys):
    def off_by_one(stage, stages, microbatches):
        forwards = [("F", i) for i in range(microbatches - 1)]
        return forwards + [("B", i) for i in range(microbatches - 1)]

    assert not check_gpipe_order(off_by_one)
    assert "never runs F1, B1" in _line(capsys)


def test_backward_before_forward_is_caught(capsys):
    def backward_first(stage, stages, microbatches):
        return [("B", i) for i in range(microbatches)] + [("F", i) for i in range(microbatches)]

    assert not check_gpipe_order(backward_first)
    assert "B0 comes before F0" in _line(capsys)


def test_stages_that_disagree_on_the_backward_order_are_caught(capsys):
    def mixed(stage, stages, microbatches):
        backwards = range(microbatches) if stage % 2 else reversed(range(microbatches))
        return [("F", i) for i in range(microbatches)] + [("B", i) for i in backwards]

    assert not check_gpipe_order(mixed)
    assert "same order" in _line(capsys)


def test_a_function_that_raises_is_reported_not_raised(capsys):
    assert not check_gpipe_order(lambda stage, stages, microbatches: 1 / 0)
    assert "raised ZeroDivisionError" in _line(capsys)


def test_a_bubble_that_raises_is_reported_not_raised(capsys):
    assert not check_bubble(lambda k, m: 1 / 0)
    assert "predict_bubble raised ZeroDivisionError" in _line(capsys)


def test_forwards_out_of_order_are_caught(capsys):
    def reversed_forwards(stage, stages, microbatches):
        forwards = [("F", i) for i in reversed(range(microbatches))]
        return forwards + [("B", i) for i in range(microbatches)]

    assert not check_gpipe_order(reversed_forwards)
    assert "should run F0, F1, ... in order" in _line(capsys)


def test_a_bubble_typed_in_for_one_pipeline_fails(capsys):
    from course_utils.model_parallel.exercises import BUBBLE_CASES
    from course_utils.model_parallel.schedules import bubble_formula

    typed_in = bubble_formula(*BUBBLE_CASES[0])  # right for the first pipeline tried
    assert not check_bubble(lambda k, m: typed_in)
    assert _line(capsys) == (
        f"✗ you predict {typed_in:.3f} for every pipeline: the bubble depends on the K stages "
        "and the M micro-batches, write it as a formula of both"
    )


def test_the_courses_own_bubble_formula_is_refused(capsys):
    from course_utils.model_parallel.schedules import bubble_formula

    assert not check_bubble(bubble_formula)
    assert "this is the course's own bubble formula: write yours" in capsys.readouterr().out
    assert not check_bubble(lambda k, m: bubble_formula(k, m))
    assert "this is the course's own bubble formula" in capsys.readouterr().out


def test_the_course_s_own_gpipe_order_is_refused(capsys):
    from course_utils.core.own_answers import message
    from course_utils.model_parallel.schedules import gpipe_order

    assert not check_gpipe_order(gpipe_order)
    assert not check_gpipe_order(lambda s, k, m: gpipe_order(s, k, m))
    assert capsys.readouterr().out.count(message("gpipe_order")) == 2
