"""Checkers for notebook 01: updates per pass, a mini-batch SGD epoch, a sweep config."""

from __future__ import annotations

import math

import torch

from ..core.checks import NOT_SOLVED, attempt, verdict
from ..core.own_answers import answer, first_problem_verdict, own_answer
from .sweep import train_trial
from .sweep_config import SweepConfigError, validate

UPDATES_CLAIM = "updates_per_epoch counts the updates of one pass, with and without drop_last"
EPOCH_CLAIM = "sgd_epoch takes one mean-gradient step per mini-batch, in the given order"
CONFIG_CLAIM = "the config asks for 6 random trials over a log-uniform lr and two batch sizes"

_CASES = [(8000, 8), (8000, 512), (6400, 512), (100, 1), (100, 100), (100, 3), (7, 10)]


def _updates(n: int, b: int, drop_last: bool) -> int:
    return n // b if drop_last else math.ceil(n / b)


def answer_values() -> dict[str, list]:
    """The checkers' cases and answers, where they are numbers (`course.revealed`)."""
    return {"updates_per_epoch": [((n, b), _updates(n, b, d)) for n, b in _CASES for d in (0, 1)]}


def answer_phrases() -> dict[str, list]:
    """What would give an answer away as text (`course.revealed`): the sweep's lr and batch
    entries written out with the exercise's values."""
    return {
        "sweep_config": [
            '"min": 1e-3, "max": 1e-1',
            '"min": 0.001, "max": 0.1',
            '"values": [16, 64]',
        ]
    }


def check_updates_per_epoch(fn) -> bool:
    """fn(num_samples, batch_size, drop_last) -> updates in one pass over the data."""
    answers = {}
    for n, b in _CASES:
        for drop_last in (False, True):
            value = attempt(fn, n, b, drop_last)
            if value is NOT_SOLVED:
                return verdict(False, NOT_SOLVED)
            answers[n, b, drop_last] = value
    if all(v == _updates(n, b, d) for (n, b, d), v in answers.items()):
        return verdict(True, UPDATES_CLAIM)
    if all(v == n // b for (n, b, _), v in answers.items()):
        return verdict(False, f"{UPDATES_CLAIM}: without drop_last the last, smaller batch counts")
    if all(v == math.ceil(n / b) for (n, b, _), v in answers.items()):
        return verdict(False, f"{UPDATES_CLAIM}: drop_last=True skips the incomplete last batch")
    return verdict(
        False, f"{UPDATES_CLAIM}: e.g. 6400 samples, batch 512 -> 13 (12 with drop_last)"
    )


@own_answer("sgd_epoch")
def _expected_epoch(w, X, y, lr, batch_size, order):
    """One pass of mini-batch SGD on the mean squared error 0.5 * (x.w - y)^2: what the
    checker compares with, refused to a learner's function that calls it."""
    w = w.clone()
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        residual = X[batch] @ w - y[batch]
        w -= lr * X[batch].T @ residual / len(batch)
    return w


def _problem(seed: int, n: int = 50, d: int = 4):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = X @ torch.randn(d, generator=g, dtype=torch.float64) + 0.1 * torch.randn(
        n, generator=g, dtype=torch.float64
    )
    return X, y, torch.zeros(d, dtype=torch.float64), torch.randperm(n, generator=g)


def check_sgd_epoch(fn) -> bool:
    """fn(w, X, y, lr, batch_size, order) -> w after one pass; compared with the reference."""
    cases = ((0, 1), (1, 8), (2, 50), (3, 7))  # (seed, batch size)
    return first_problem_verdict(
        fn, "sgd_epoch", lambda *case: _epoch_problem(fn, *case), cases, EPOCH_CLAIM
    )


def _epoch_problem(fn, seed: int, batch_size: int) -> str | None:
    X, y, w0, order = _problem(seed)
    got = answer(fn, w0.clone(), X, y, 0.05, batch_size, order)
    got = torch.as_tensor(got, dtype=torch.float64)
    want = _expected_epoch(w0, X, y, 0.05, batch_size, order)
    if got.shape == want.shape and torch.allclose(got, want, atol=1e-8):
        return None
    return f"{EPOCH_CLAIM}: {_diagnose(got, X, y, w0, batch_size, order)}"


def _diagnose(got, X, y, w0, batch_size, order) -> str:
    """Name the classic mistake the learner's result matches, if any."""
    mean_grad = X.T @ (X @ w0 - y) / len(y)
    if got.shape != w0.shape:
        return f"return the weights, shape {tuple(w0.shape)}, not {tuple(got.shape)}"
    if torch.allclose(got, w0 - 0.05 * mean_grad):
        return "that is one full-batch GD step; update after every mini-batch"
    if torch.allclose(got, _expected_epoch(w0, X, y, -0.05, batch_size, order)):
        return "the step goes uphill; subtract lr * gradient"
    summed = _expected_epoch(w0, X, y, 0.05 * batch_size, batch_size, order)
    if batch_size > 1 and torch.allclose(got, summed):
        return "divide the batch's summed gradient by the batch size (use the mean)"
    if len(order) % batch_size:
        whole = order[: len(order) - len(order) % batch_size]
        if torch.allclose(got, _expected_epoch(w0, X, y, 0.05, batch_size, whole)):
            return "the last, smaller batch was skipped; it is part of the pass"
    return "the weights differ from one pass of mini-batch SGD in `order`"


def _written(config):
    """The config as the learner left it; the notebook's stub is an empty dict."""
    return config or None


def check_sweep_config(config) -> bool:
    """The learner's config: random search, 6 trials, lr log-uniform in [1e-3, 1e-1],
    batch_size in {16, 64}, maximising validation accuracy."""
    if attempt(_written, config) is NOT_SOLVED:
        return verdict(False, NOT_SOLVED)
    try:
        checked = validate(config, train_trial)
    except SweepConfigError as exc:
        return verdict(False, f"{CONFIG_CLAIM}: the sweep refuses it ({exc})")
    p, spec = checked["parameters"], checked["spec"]
    problems = []
    if checked["algorithm"] != "random":
        problems.append("use algorithm 'random'")
    if checked["budget"] != 6:
        problems.append("set budget to 6 trials")
    lr = p.get("lr", {})
    if lr.get("distribution") != "log_uniform" or (lr.get("min"), lr.get("max")) != (1e-3, 1e-1):
        problems.append("lr: {'min': 0.001, 'max': 0.1, 'distribution': 'log_uniform'}")
    if sorted(p.get("batch_size", {}).get("values", [])) != [16, 64]:
        problems.append("batch_size: {'values': [16, 64]}")
    if spec["metric"] != "val_acc":
        problems.append("optimise 'val_acc'")
    elif spec["objective"] != "maximize":
        problems.append("accuracy is better when higher: objective 'maximize'")
    if problems:
        return verdict(False, f"{CONFIG_CLAIM}: " + "; ".join(problems))
    return verdict(True, CONFIG_CLAIM)
