"""Every value a default sweep would train with is checked before any trial starts."""

from __future__ import annotations

import json
from argparse import Namespace

import pytest

from course_utils.sgd import sweep
from course_utils.sgd.sweep_config import SweepConfigError, validate
from course_utils.sgd.trials import train_trial


def config(**parameters) -> dict:
    return {
        "algorithm": "grid",
        "parameters": {k: {"values": v} for k, v in parameters.items()},
        "spec": {"metric": "val_loss", "objective": "minimize"},
    }


@pytest.mark.parametrize(
    "parameters, match",
    [
        ({"batch_size": [0, 32]}, r"parameters.batch_size: expected a whole number >= 1, got 0"),
        ({"batch_size": [-8]}, r"parameters.batch_size: .* got -8"),
        ({"batch_size": ["32"]}, r"parameters.batch_size: .* got '32'"),
        ({"batch_size": [8, "32"]}, r"parameters.batch_size.values: mixed kinds"),
        ({"epochs": [0]}, r"parameters.epochs: expected a whole number >= 1"),
        ({"hidden": [2.5]}, r"parameters.hidden: expected a whole number >= 1"),
        ({"lr": [0.1, 0]}, r"parameters.lr: expected a number > 0, got 0"),
        ({"lr": [-1e-3]}, r"parameters.lr: expected a number > 0"),
        ({"momentum": [1.5]}, r"parameters.momentum: expected a number from 0 to 1"),
    ],
)
def test_bad_values_are_refused_naming_the_parameter(parameters, match):
    with pytest.raises(SweepConfigError, match=match):
        validate(config(**parameters), train_trial)


def test_a_random_range_is_checked_at_both_ends():
    cfg = config()
    cfg.update(algorithm="random", budget=2)
    cfg["parameters"] = {"lr": {"min": 0, "max": 0.1}}
    with pytest.raises(SweepConfigError, match=r"parameters.lr: expected a number > 0, got 0"):
        validate(cfg, train_trial)


def test_good_values_pass_unchanged_with_the_defaults_filled_in():
    checked = validate(config(batch_size=[8, 32], lr=[0.01, 0.1], epochs=[1]), train_trial)
    assert {name: p["values"] for name, p in checked["parameters"].items()} == {
        "batch_size": [8, 32],
        "lr": [0.01, 0.1],
        "epochs": [1],
    }
    assert {p["distribution"] for p in checked["parameters"].values()} == {"discrete"}
    assert (checked["budget"], checked["seed"], checked["repeats"]) == (None, 0, 1)


def test_train_trial_never_replaces_a_zero_with_the_default():
    with pytest.raises(ValueError, match="batch_size: expected a whole number >= 1, got 0"):
        train_trial(batch_size=0)


def _cli(tmp_path, config_path, jobs=2):
    return sweep.cli(Namespace(config=str(config_path), jobs=jobs, json=True))


def test_cli_blames_minus_j_not_the_config(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config(batch_size=[8])))
    assert _cli(tmp_path, path, jobs=0) == 2
    err = capsys.readouterr().err
    assert "-j must be" in err and "config" not in err


def test_cli_says_a_directory_is_not_a_config(tmp_path, capsys):
    assert _cli(tmp_path, tmp_path) == 2
    err = capsys.readouterr().err
    assert "cannot read the config" in err and "Traceback" not in err
