"""Notebook 04's checkers pass the reference solutions and explain the usual mistakes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch.distributed as dist

from course_utils.exercises.ddp import check_average_gradients, check_updates_per_epoch

SOLUTION = Path(__file__).resolve().parent.parent / "notebooks/solutions/04_data_parallel.py"


def _solution():
    spec = importlib.util.spec_from_file_location("solution_04", SOLUTION)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
