"""The course's own answers are refused inside a checker's window, and only there."""

from __future__ import annotations

import functools
import pickle

import pytest

from course_utils.core import own_answers
from course_utils.core.errors import LaunchError


@own_answers.own_answer("double")
def double(x):
    return 2 * x


def test_a_marked_function_works_outside_and_is_refused_inside():
    assert double(2) == 4
    with own_answers.refusing(), pytest.raises(own_answers.OwnAnswerUsed, match="own double"):
        double(2)
    assert double(3) == 6


def test_a_marked_function_is_recognised_even_as_a_partial():
    assert own_answers.own_answer_name(double) == "double"
    assert own_answers.own_answer_name(functools.partial(double)) == "double"
    assert own_answers.own_answer_name(lambda x: 2 * x) is None


def test_refusing_wraps_the_learner_function_and_travels_to_ranks():
    wrapped = pickle.loads(pickle.dumps(own_answers.Refusing(double)))
    with pytest.raises(own_answers.OwnAnswerUsed):
        wrapped(1)
    assert double(1) == 2  # the window closed


def test_a_refusal_on_a_rank_is_read_back_from_the_launch_error():
    error = LaunchError("rank 0 raised", exc_type="OwnAnswerUsed", remote_traceback=(
        "Traceback ...\nOwnAnswerUsed: this is the course's own ring: write yours\n"))  # fmt: skip
    assert own_answers.from_launch(error) == "this is the course's own ring: write yours"
    assert own_answers.from_launch(LaunchError("x", exc_type="ValueError")) is None


def _first_problem(fn, capsys):
    """The ✗ line of a checker that asks fn(x) for 2x and reads the result as a number."""

    def problem(x):
        return None if float(own_answers.answer(fn, x)) == 2 * x else "not twice x"

    verdict = own_answers.first_problem_verdict(fn, "twice", problem, [(1,), (2,)], "solved")
    return verdict, capsys.readouterr().out


def test_an_error_the_learner_raised_is_named_as_theirs(capsys):
    verdict, line = _first_problem(lambda x: x / 0, capsys)
    assert not verdict
    assert "twice raised ZeroDivisionError: division by zero" in line


def test_a_result_the_checker_cannot_read_is_not_called_an_error_the_learner_raised(capsys):
    verdict, line = _first_problem(lambda x: [x, x], capsys)
    assert not verdict
    assert "twice raised" not in line
    assert "the checker could not read what twice returned (TypeError" in line


def test_a_right_answer_is_solved_and_the_stub_is_not(capsys):
    assert _first_problem(lambda x: 2 * x, capsys)[0]
    verdict, line = _first_problem(lambda x: None, capsys)
    assert not verdict and "not solved" in line.lower()
