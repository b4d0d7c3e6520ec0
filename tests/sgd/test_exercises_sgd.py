"""Notebook 01's checkers accept the reference solutions and explain each usual mistake."""

from __future__ import annotations

import math

import pytest
from reference import load_solution

from course_utils.sgd.exercises import (
    check_sgd_epoch,
    check_sweep_config,
    check_updates_per_epoch,
)


def reference_sgd_epoch(w, X, y, lr, batch_size, order):
    """The tests' own pass of mini-batch SGD: the checker refuses the course's."""
    w = w.clone()
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        w -= lr * X[batch].T @ (X[batch] @ w - y[batch]) / len(batch)
    return w


@pytest.fixture(scope="module")
def solution():
    return load_solution("01_sgd.py")


def _lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_reference_solutions_pass(solution, capsys):
    assert check_updates_per_epoch(solution.updates_per_epoch)
    assert check_sgd_epoch(solution.sgd_epoch)
    assert check_sweep_config(solution.SWEEP_CONFIG)
    assert all(line.startswith("✓") for line in _lines(capsys))


def unsolved(*args):
    raise NotImplementedError


def test_unsolved_exercises_say_so(capsys):
    assert not check_updates_per_epoch(unsolved)
    assert not check_sgd_epoch(lambda *args: None)
    assert not check_sweep_config({})
    assert _lines(capsys) == ["✗ not solved yet"] * 3


def test_updates_per_epoch_mistakes(capsys):
    assert not check_updates_per_epoch(lambda n, b, drop_last=False: n // b)
    assert not check_updates_per_epoch(lambda n, b, drop_last=False: math.ceil(n / b))
    assert not check_updates_per_epoch(lambda n, b, drop_last=False: n / b)
    first, second, third = _lines(capsys)
    assert "last, smaller batch counts" in first
    assert "drop_last=True skips" in second
    assert "13 (12 with drop_last)" in third


def gd_instead(w, X, y, lr, batch_size, order):
    return w - lr * X.T @ (X @ w - y) / len(y)


def uphill(w, X, y, lr, batch_size, order):
    return reference_sgd_epoch(w, X, y, -lr, batch_size, order)


def summed(w, X, y, lr, batch_size, order):
    return reference_sgd_epoch(w, X, y, lr * batch_size, batch_size, order)


def drops_last(w, X, y, lr, batch_size, order):
    whole = order[: len(order) - len(order) % batch_size]
    return reference_sgd_epoch(w, X, y, lr, batch_size, whole)


def test_sgd_epoch_mistakes(capsys):
    for mistake in (gd_instead, uphill, summed, drops_last, lambda *a: a[0][:2]):
        assert not check_sgd_epoch(mistake)
    lines = _lines(capsys)
    assert "one full-batch GD step" in lines[0]
    assert "goes uphill" in lines[1]
    assert "use the mean" in lines[2]
    assert "last, smaller batch was skipped" in lines[3]
    assert "return the weights, shape (4,)" in lines[4]
    assert not check_sgd_epoch(lambda *a: 1 / 0)  # the learner's error is a ✗, not a crash
    assert "sgd_epoch raised ZeroDivisionError" in _lines(capsys)[0]


def test_sweep_config_mistakes(solution, capsys):
    good = solution.SWEEP_CONFIG
    minimised = {**good, "spec": {"metric": "val_acc", "objective": "minimize"}}
    as_grid = {**good, "algorithm": "grid"}
    linear = {**good, "parameters": {**good["parameters"], "lr": {"min": 0.001, "max": 0.1}}}
    typo = {**good, "parameters": {**good["parameters"], "batchsize": {"values": [16, 64]}}}
    for config in (minimised, as_grid, linear, typo):
        assert not check_sweep_config(config)
    lines = _lines(capsys)
    assert "objective 'maximize'" in lines[0]
    assert "refuses it" in lines[1] and "parameters.lr" in lines[1]
    assert "log_uniform" in lines[2]
    assert "parameters.batchsize" in lines[3]


def test_sweep_config_budget_batches_and_metric(solution, capsys):
    good = solution.SWEEP_CONFIG
    longer = {**good, "budget": 10}
    batches = {**good, "parameters": {**good["parameters"], "batch_size": {"values": [16, 32]}}}
    loss = {**good, "spec": {"metric": "val_loss", "objective": "minimize"}}
    for config in (longer, batches, loss):
        assert not check_sweep_config(config)
    budget, batch, metric = _lines(capsys)
    assert "set budget to 6 trials" in budget
    assert "batch_size: {'values': [16, 64]}" in batch
    assert "optimise 'val_acc'" in metric


def test_the_checker_own_epoch_is_refused(capsys):
    from course_utils.sgd import exercises

    assert not check_sgd_epoch(exercises._expected_epoch)
    assert not check_sgd_epoch(lambda *args: exercises._expected_epoch(*args))
    assert _lines(capsys) == ["✗ this is the course's own sgd_epoch: write yours"] * 2
