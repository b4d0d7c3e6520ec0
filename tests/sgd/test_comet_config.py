"""The report's Comet Optimizer config runs unchanged, byte for byte (its `#` comments and
trailing commas included), and Comet's other keys mean what they mean there; what needs
Comet's service is refused with what to use instead."""

from __future__ import annotations

import json
from argparse import Namespace
from pathlib import Path

import pytest

from course_utils.sgd import sweep
from course_utils.sgd.sweep_config import SweepConfigError, trials_from, validate
from course_utils.sgd.trials import train_trial

REPORT = Path(__file__).resolve().parents[2] / "notebooks" / "optim.config"
# the report's config exactly as it prints it, its comment on Bayes above a random search too
REPORT_TEXT = """{
# We pick the Bayes algorithm:
"algorithm": "random",
# Declare your hyperparameters in the Vizier-inspired format:
"parameters": {
"batch_size": {
"type": "discrete",
"values": [8, 32, 128, 512]
},
},
# Declare what we will be optimizing, and how:
"spec": {
"metric": "val_loss",
"objective": "minimize",
},
}
"""
REPORT_CONFIG = {
    "algorithm": "random",
    "parameters": {"batch_size": {"type": "discrete", "values": [8, 32, 128, 512]}},
    "spec": {"metric": "val_loss", "objective": "minimize"},
}


def report_config() -> dict:
    return sweep.read_config(REPORT)


def test_the_notebooks_optim_config_is_the_reports_text_byte_for_byte():
    assert REPORT.read_bytes() == REPORT_TEXT.encode()


def test_the_reports_text_is_read_as_written(tmp_path):
    path = tmp_path / "optim.config"
    path.write_text(REPORT_TEXT)
    with pytest.raises(json.JSONDecodeError):  # what a plain JSON reader makes of it
        json.loads(REPORT_TEXT)
    assert sweep.read_config(path) == REPORT_CONFIG
    trials = trials_from(validate(sweep.read_config(path), train_trial))
    assert sorted(t["batch_size"] for t in trials) == [8, 32, 128, 512]  # each once, shuffled


def test_a_hash_or_comma_inside_a_string_stays_and_trailing_commas_in_lists_go(tmp_path):
    path = tmp_path / "c.config"
    path.write_text(
        '{"name": "run #1, # not a comment",  # a comment\n'
        '"values": [8, 32,],  # a comma before ]\n'
        '"quoted": "say \\"#\\" or ,}", "empty": "",\n'
        '"nested": [{"a": [1,],},],\n'
        "}\n"
    )
    assert sweep.read_config(path) == {
        "name": "run #1, # not a comment",
        "values": [8, 32],
        "quoted": 'say "#" or ,}',
        "empty": "",
        "nested": [{"a": [1]}],
    }
    path.write_text(json.dumps(REPORT_CONFIG, indent=1))  # plain JSON reads as it always did
    assert sweep.read_config(path) == REPORT_CONFIG


@pytest.mark.parametrize(
    "broken, line, problem",
    [
        (REPORT_TEXT.rstrip().removesuffix("}"), 15, "ends before every { and \\[ is closed"),
        (REPORT_TEXT.replace('"discrete",', '"discrete"'), 8, "Expecting ',' delimiter"),
        (REPORT_TEXT.replace('"metric": "val_loss"', '"metric": val_loss'), 13, "Expecting value"),
        (REPORT_TEXT.replace("[8, 32,", "[8, 32,,"), 8, "Expecting value"),
        (REPORT_TEXT + "}\n", 17, "Extra data"),
    ],
)
def test_a_broken_config_names_its_line_and_what_to_do(tmp_path, broken, line, problem):
    path = tmp_path / "optim.config"
    path.write_text(broken)
    with pytest.raises(sweep.SweepConfigError, match=rf"line {line} .*{problem}") as caught:
        sweep.read_config(path)
    written = broken.splitlines()[line - 1].strip()
    assert repr(written) in str(caught.value) and "# comments" in str(caught.value)


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
