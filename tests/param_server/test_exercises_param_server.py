"""Notebook 07's checkers accept the reference solutions and explain each classic mistake."""

from __future__ import annotations

import pytest
from reference import load_solution

from course_utils.param_server.exercises import check_server_bytes, check_staleness


def _solution():
    return load_solution("07_param_server.py")


def _line(capsys) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_reference_solutions_pass(capsys):
    assert check_server_bytes(_solution().server_bytes)
    assert _line(capsys).startswith("✓ server_bytes")
    assert check_staleness(_solution().staleness)
    assert _line(capsys).startswith("✓ staleness")


def unsolved(*args):
    raise NotImplementedError


def returns_nothing(*args):
    pass


@pytest.mark.parametrize("checker", [check_server_bytes, check_staleness])
@pytest.mark.parametrize("learner", [unsolved, returns_nothing])
def test_unsolved_says_so(capsys, checker, learner):
    assert not checker(learner)
    assert _line(capsys) == "✗ not solved yet"


def test_one_direction_only_is_caught(capsys):
    assert not check_server_bytes(lambda workers, numel, itemsize: workers * numel * itemsize)
    assert "one direction" in _line(capsys)


def test_forgetting_the_workers_is_caught(capsys):
    assert not check_server_bytes(lambda workers, numel, itemsize: 2 * numel * itemsize)
    assert "count every message" in _line(capsys)


def test_counting_the_own_update_is_caught(capsys):
    def off_by_one(events):
        return [s + 1 for s in _solution().staleness(events)]

    assert not check_staleness(off_by_one)
    assert "off by one" in _line(capsys)


def test_global_count_instead_of_last_pull_is_caught(capsys):
    def since_start(events):
        return list(range(sum(1 for kind, _ in events if kind == "push")))

    assert not check_staleness(since_start)
    assert "last* pull" in _line(capsys)


def test_a_crashing_solution_is_reported(capsys):
    assert not check_staleness(lambda events: 1 / 0)
    assert "ZeroDivisionError" in _line(capsys)


def test_server_bytes_that_raises_is_reported(capsys):
    assert not check_server_bytes(lambda workers, numel, itemsize: 1 / 0)
    assert "server_bytes raised ZeroDivisionError" in _line(capsys)


def test_staleness_that_is_not_a_list_of_numbers_is_caught(capsys):
    assert not check_staleness(lambda events: "stale")
    assert "a list of whole numbers" in _line(capsys)


def test_one_number_per_push_is_required(capsys):
    assert not check_staleness(lambda events: [0] * len(events))
    assert "one number per push" in _line(capsys)


def test_bytes_typed_in_for_one_case_fail(capsys):
    from course_utils.param_server.exercises import BYTES_CASES, expected_server_bytes

    typed_in = expected_server_bytes(*BYTES_CASES[0])  # right for the first case tried
    assert not check_server_bytes(lambda workers, numel, itemsize: typed_in)
    assert _line(capsys) == (
        f"✗ you say {typed_in} for every case: the bytes grow with the workers and the size "
        "of the model, count them from the arguments"
    )


def test_the_course_own_count_is_refused(capsys):
    from course_utils.param_server.exercises import expected_server_bytes

    assert not check_server_bytes(expected_server_bytes)
    assert not check_server_bytes(lambda w, n, s: expected_server_bytes(w, n, s))
    assert capsys.readouterr().out.splitlines() == [
        "✗ this is the course's own server_bytes: write yours",
        "✗ this is the course's own server_bytes: write yours",
    ]
