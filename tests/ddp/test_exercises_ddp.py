"""Notebook 04's checkers pass the reference solutions and explain the usual mistakes."""

from __future__ import annotations

import torch.distributed as dist
from reference import load_solution

from course_utils.ddp.exercises import check_average_gradients, check_updates_per_epoch


def _solution():
    return load_solution("04_data_parallel.py")


def _failures(capsys) -> list[str]:
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("✗")]


def test_reference_solutions_pass(capsys):
    solution = _solution()
    assert check_average_gradients(solution.average_gradients)
    assert check_updates_per_epoch(solution.updates_per_epoch)
    assert not _failures(capsys)


def unsolved(model):
    raise NotImplementedError


def summed_only(model):
    for p in model.parameters():
        dist.all_reduce(p.grad)


def no_communication(model):
    pass


def test_averaging_mistakes_are_explained(capsys):
    assert not check_average_gradients(unsolved)
    assert not check_average_gradients(summed_only)
    assert not check_average_gradients(no_communication)
    lines = _failures(capsys)
    assert lines[0] == "✗ not solved yet"
    assert "divide the summed gradients by N" in lines[1]
    assert "every rank must all_reduce every gradient" in lines[2]


def test_counting_mistakes_are_explained(capsys):
    assert not check_updates_per_epoch(lambda s, n, b: None)
    assert not check_updates_per_epoch(lambda s, n, b: s // b)
    assert not check_updates_per_epoch(lambda s, n, b: -(-s // (n * b)))
    lines = _failures(capsys)
    assert lines[0] == "✗ not solved yet"
    assert "N times fewer updates" in lines[1]
    assert "drop_last" in lines[2]


def test_the_course_own_answers_are_refused(capsys):
    from course_utils.ddp import equivalence

    assert not check_average_gradients(equivalence.average_gradients)
    assert not check_updates_per_epoch(equivalence.steps_per_epoch)
    assert not check_updates_per_epoch(lambda s, n, b: equivalence.steps_per_epoch(s, n, b))
    assert _failures(capsys) == [
        "✗ this is the course's own average_gradients: write yours",
        "✗ this is the course's own steps_per_epoch: write yours",
        "✗ this is the course's own steps_per_epoch: write yours",
    ]


def test_averaging_that_calls_the_course_own_is_refused_on_the_ranks(capsys):
    from course_utils import ddp

    assert not check_average_gradients(lambda model: ddp.average_gradients(model), steps=2)
    assert _failures(capsys) == ["✗ this is the course's own average_gradients: write yours"]
