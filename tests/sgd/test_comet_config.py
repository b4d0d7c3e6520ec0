"""The report's Comet Optimizer config runs unchanged, and Comet's other keys mean what they
mean there; what needs Comet's service is refused with what to use instead."""

from __future__ import annotations

import json
from argparse import Namespace
from pathlib import Path

import pytest

from course_utils.sgd import sweep
from course_utils.sgd.sweep_config import SweepConfigError, trials_from, validate
from course_utils.sgd.trials import train_trial

REPORT = Path(__file__).resolve().parents[2] / "notebooks" / "optim.config"


def report_config() -> dict:
    return json.loads(REPORT.read_text())


def test_the_reports_config_is_accepted_as_written():
    config = report_config()
    assert config == {
        "algorithm": "random",
        "parameters": {"batch_size": {"type": "discrete", "values": [8, 32, 128, 512]}},
        "spec": {"metric": "val_loss", "objective": "minimize"},
    }
    trials = trials_from(validate(config, train_trial))
    assert sorted(t["batch_size"] for t in trials) == [8, 32, 128, 512]  # each once, shuffled


def test_max_combo_caps_a_random_search_and_trials_repeat_each_set():
    config = {**report_config(), "spec": {**report_config()["spec"], "maxCombo": 2}}
    assert len(trials_from(validate(config, train_trial))) == 2
    repeated = trials_from(validate({**report_config(), "trials": 2}, train_trial))
    assert len(repeated) == 8 and repeated[0] == repeated[1]


def test_comets_types_become_ranges_and_grids():
    def trial(n=1, lr=0.1, opt="sgd", bs=8):
        return {"loss": 0.0}

    parameters = {
        "n": {"type": "integer", "min": 1, "max": 3},
        "lr": {"type": "float", "min": 1e-3, "max": 1e-1, "scalingType": "loguniform"},
        "opt": {"type": "categorical", "values": ["sgd", "adam"]},
        "bs": {"type": "discrete", "values": [8, 32]},
    }
    spec = {"metric": "loss", "objective": "minimize", "gridSize": 3, "retryLimit": 20}
    grid = trials_from(
        validate({"algorithm": "grid", "parameters": parameters, "spec": spec}, trial)
    )
    assert len(grid) == 3 * 3 * 2 * 2
    assert sorted({t["lr"] for t in grid}) == pytest.approx([1e-3, 1e-2, 1e-1])
    assert {t["n"] for t in grid} == {1, 2, 3} and {t["opt"] for t in grid} == {"sgd", "adam"}
    spec = {**spec, "maxCombo": 20}
    drawn = trials_from(
        validate({"algorithm": "random", "parameters": parameters, "spec": spec}, trial)
    )
    assert len(drawn) == 20 and all(1e-3 <= t["lr"] <= 1e-1 and t["n"] in (1, 2, 3) for t in drawn)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"algorithm": "bayes"}, "not supported here.*use 'random' or 'grid'"),
        ({"parameters": {"batch_size": {"type": "float", "min": 1, "max": 2}}}, "maxCombo"),
        (
            {
                "parameters": {
                    "batch_size": {"type": "float", "min": 1, "max": 9, "scalingType": "normal"}
                }
            },
            "scalingType",
        ),  # fmt: skip
        ({"parameters": {"batch_size": {"type": "discrete", "values": ["8"]}}}, "categorical"),
        ({"parameters": {"batch_size": {"type": "weird", "values": [8]}}}, "type"),
        ({"spec": {"metric": "val_loss", "objective": "minimize", "maxCombo": -1}}, "maxCombo"),
        ({"spec": {"metric": "val_loss", "objective": "minimize", "maxCombos": 2}}, "maxCombos"),
        ({"trials": 0}, "trials"),
    ],
)
def test_what_cannot_run_here_is_refused_naming_the_key(change, message):
    with pytest.raises(SweepConfigError, match=message):
        validate({**report_config(), **change}, train_trial)


def fast_trial(batch_size: int = 8) -> dict:
    return {"val_loss": 1.0 / batch_size, "train_loss": 0.0, "test_acc": 0.5}


def test_the_command_runs_the_reports_file_four_at_a_time(monkeypatch, capsys):
    monkeypatch.setattr(sweep, "resolve_trial", lambda spec: fast_trial)
    assert sweep.cli(Namespace(config=str(REPORT), jobs=4, json=True)) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["jobs"] == 4 and len(result["trials"]) == 4
    assert result["best"]["params"] == {"batch_size": 512}
