"""The parallel search: every config error is refused before anything runs, trials run
`jobs` at a time and agree with calling the trial directly (the serial twin), a failing
or hanging trial is reported while the others' results are kept, and nothing is left."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import signal
import sys
import time
from argparse import Namespace
from pathlib import Path

import psutil
import pytest
import torch

from course_utils.ranks.launch import live_children
from course_utils.sgd import sweep
from course_utils.sgd.sweep_config import trials_from, validate


def quadratic(x: float = 0.0, pause: float = 0.0) -> dict:
    time.sleep(pause)
    return {"loss": (x - 3) ** 2, "pid": os.getpid(), "threads": torch.get_num_threads()}


def flaky(x: float = 0.0) -> dict:
    if x == 2:
        raise ZeroDivisionError("trial 2 divides by zero")
    if x == 3:
        os._exit(3)
    return {"loss": x}


def faulty(x: float = 0.0) -> dict:
    if x == 1:
        raise ZeroDivisionError("trial 1 divides by zero")
    if x == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    if x == 3:
        time.sleep(60)
    return {"loss": x}


def wall(x: float, folder: Path) -> dict:
    """0.6 s of a trial that does not end before a second trial has started (or 10 s passed)."""
    start = time.time()
    (folder / f"{x}").touch()
    while len(list(folder.iterdir())) < 2 and time.time() < start + 10:
        time.sleep(0.01)
    time.sleep(max(0.0, start + 0.6 - time.time()))
    return {"loss": x, "start": start, "end": time.time()}


def grid(values, **extra) -> dict:
    return {
        "algorithm": "grid",
        "parameters": {"x": {"values": values}},
        "spec": {"metric": "loss", "objective": "minimize"},
        **extra,
    }


GOOD = grid([1, 2])


@pytest.mark.parametrize(
    "change, key",
    [
        ({"algorithm": "bayes"}, "algorithm"),
        ({"algorithm": None}, "algorithm"),
        ({"parameters": {"x": {"values": []}}}, "parameters.x.values"),
        ({"parameters": {}}, "parameters"),
        ({"parameters": {"x": [1, 2]}}, "parameters.x"),
        ({"parameters": {"y": {"values": [1]}}}, "parameters.y"),
        ({"parameters": {"x": {"min": 0, "max": 1}}}, "parameters.x"),  # grid with a range
        ({"spec": {"metric": "loss", "objective": "minimise"}}, "spec.objective"),
        ({"spec": {"objective": "minimize"}}, "spec.metric"),
        ({"spec": {"metric": "loss", "objective": "minimize", "goal": 1}}, "spec.goal"),
        ({"spec": "loss"}, "spec"),
        ({"budget": 0}, "budget"),
        ({"budget": "4"}, "budget"),
        ({"seed": 1.5}, "seed"),
        ({"algoritm": "grid"}, "algoritm"),
        ({"trial": "no_such_module:fn"}, "trial"),
    ],
)
def test_every_config_error_names_its_key(change, key):
    config = {**GOOD, **change}
    config = {k: v for k, v in config.items() if v is not None}
    with pytest.raises(sweep.SweepConfigError, match=rf"^{key}\b|'{key}'"):
        sweep.run(config, jobs=2, trial=None if "trial" in change else quadratic)


@pytest.mark.parametrize(
    "parameter, key",
    [
        ({"min": 1, "max": 1}, "parameters.x"),
        ({"min": "a", "max": 1}, "parameters.x"),
        ({"min": 0, "max": 1, "distribution": "log_uniform"}, "parameters.x.min"),
        ({"min": 0, "max": 1, "distribution": "normal"}, "parameters.x.distribution"),
        ({"values": [1], "min": 0}, "parameters.x"),
        ({"max": 1}, "parameters.x"),
    ],
)
def test_random_search_ranges_are_checked(parameter, key):
    config = {**GOOD, "algorithm": "random", "budget": 3, "parameters": {"x": parameter}}
    with pytest.raises(sweep.SweepConfigError, match=rf"^{key}\b"):
        validate(config, quadratic)


def test_missing_pieces_and_shapes_are_refused():
    with pytest.raises(sweep.SweepConfigError, match="^budget: missing"):
        validate({**GOOD, "algorithm": "random"}, quadratic)
    with pytest.raises(sweep.SweepConfigError, match="^spec: missing"):
        validate({k: v for k, v in GOOD.items() if k != "spec"}, quadratic)
    with pytest.raises(sweep.SweepConfigError, match="JSON object"):
        validate([GOOD], quadratic)
    with pytest.raises(sweep.SweepConfigError, match="spec.metric: 'val_los'.*val_loss"):
        validate(
            {
                **GOOD,
                "spec": {"metric": "val_los", "objective": "minimize"},
                "parameters": {"lr": {"values": [0.1]}},
            },
            sweep.train_trial,
        )
    with pytest.raises(ValueError, match="jobs"):
        sweep.run(GOOD, jobs=0, trial=quadratic)


def test_a_bad_config_starts_no_trial(tmp_path):
    marker = tmp_path / "ran"

    def leaves_a_mark(x=0):
        marker.write_text("ran")
        return {"loss": x}

    with pytest.raises(sweep.SweepConfigError):
        sweep.run(grid([]), jobs=2, trial=leaves_a_mark)
    assert not marker.exists()


def test_grid_is_every_combination_and_budget_caps_it():
    config = validate(
        {**GOOD, "parameters": {"x": {"values": [1, 2]}, "pause": {"values": [0, 0.1, 0.2]}}},
        quadratic,
    )
    assert trials_from(config) == [{"x": x, "pause": p} for x in (1, 2) for p in (0, 0.1, 0.2)]
    assert len(trials_from({**config, "budget": 4})) == 4


def test_random_search_is_seeded_and_stays_in_range():
    config = {
        "algorithm": "random",
        "parameters": {
            "x": {"min": 1e-3, "max": 1e-1, "distribution": "log_uniform"},
            "pause": {"values": [0, 1]},
        },
        "spec": {"metric": "loss", "objective": "maximize"},
        "budget": 50,
        "seed": 4,
    }
    a = trials_from(validate(config, quadratic))
    assert a == trials_from(validate(config, quadratic))
    assert a != trials_from(validate({**config, "seed": 5}, quadratic))
    assert len(a) == 50 and all(1e-3 <= t["x"] <= 1e-1 and t["pause"] in (0, 1) for t in a)
    logs = sorted(math.log10(t["x"]) for t in a)
    assert logs[10] < -2.2 and logs[-10] > -1.8  # spread over the decades, not bunched at 0.1


def test_parallel_trials_equal_calling_the_trial_directly():
    result = sweep.run(grid([0, 1, 3, 5]), jobs=2, trial=quadratic)
    assert [t.metrics["loss"] for t in result.trials] == [
        quadratic(x)["loss"] for x in (0, 1, 3, 5)
    ]
    assert result.best.params == {"x": 3}
    pids = {t.metrics["pid"] for t in result.trials}
    assert len(pids) == 4 and os.getpid() not in pids
    assert {t.metrics["threads"] for t in result.trials} == {1}  # forked trials: one thread
    assert {t.slot for t in result.trials} == {0, 1}
    assert "<- best" in result.table().splitlines()[2]
    assert json.loads(json.dumps(result.as_dict()))["best"]["params"] == {"x": 3}


def test_maximize_picks_the_largest():
    result = sweep.run(
        {**grid([0, 1, 3]), "spec": {"metric": "loss", "objective": "maximize"}},
        jobs=3,
        trial=quadratic,
    )
    assert result.best.params == {"x": 0}


def test_at_most_jobs_trials_run_at_once_and_two_lanes_run_side_by_side(tmp_path):
    result = sweep.run(grid([0, 1, 2, 3]), jobs=2, trial=lambda x=0: wall(x, tmp_path))
    spans = [(t.metrics["start"], t.metrics["end"]) for t in result.trials]
    for moment in [s for s, _ in spans]:
        assert sum(s <= moment < e for s, e in spans) <= 2
    # each of the first two trials waits for the other to start, so they overlap when the
    # sweep runs two at once; one at a time, the first gives up after 10 s and they do not
    first, second = result.trials[:2]
    assert (
        first.metrics["start"] < second.metrics["end"]
        and second.metrics["start"] < first.metrics["end"]
    )


def test_a_failing_trial_is_reported_and_the_others_kept():
    result = sweep.run(grid([1, 2, 3, 4]), jobs=2, trial=flaky)
    by_x = {t.params["x"]: t for t in result.trials}
    assert by_x[1].metrics == {"loss": 1.0} and by_x[4].metrics == {"loss": 4.0}
    assert by_x[2].error == "ZeroDivisionError: trial 2 divides by zero"
    assert "Traceback" in by_x[2].traceback
    assert "exited with code 3" in by_x[3].error
    assert [t.index for t in result.failed] == [1, 2]
    assert result.best.params == {"x": 1}
    assert "FAILED ZeroDivisionError" in result.table()


def test_a_trial_without_the_metric_or_a_dict_fails_clearly():
    result = sweep.run(grid([1]), jobs=1, trial=lambda x=0: {"other": 1})
    assert result.best is None and "returned no 'loss', only other" in result.trials[0].error
    result = sweep.run(grid([1]), jobs=1, trial=lambda x=0: [x])
    assert "must return a dict" in result.trials[0].error


@pytest.mark.parametrize(
    "x, error",
    [
        (1, "ZeroDivisionError: trial 1 divides by zero"),
        (2, "the trial process was killed by SIGKILL before returning metrics"),
        (3, "TimeoutError: stopped after 1.5 s"),
    ],
    ids=["raises", "sigkilled", "hangs"],
)
def test_a_trial_that_raises_dies_or_hangs_is_named_fast_and_nothing_is_left(x, error):
    start = time.monotonic()
    result = sweep.run(grid([0, x]), jobs=2, trial=faulty, timeout=1.5)
    assert time.monotonic() - start < 30
    assert [t.index for t in result.failed] == [1] and result.trials[0].ok
    assert result.failed[0].error == error
    assert re.search(rf"trial +1 +x={x} +FAILED {re.escape(error)}", result.table())
    assert live_children() == []


def test_an_interrupt_stops_every_trial():
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            sweep.run(
                {**grid([0]), "parameters": {"pause": {"values": [60, 60, 60]}}},
                jobs=2,
                trial=quadratic,
            )
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    # the autouse fixture in conftest.py fails the test if a trial process is still alive


def test_train_trial_returns_every_metric_it_declares():
    metrics = sweep.train_trial(batch_size=512, epochs=1)
    assert set(metrics) == set(sweep.train_trial.metrics)
    assert 0 <= metrics["test_acc"] <= 1 and metrics["steps"] > 0


@pytest.fixture
def trial_module(tmp_path, monkeypatch):
    (tmp_path / "sweep_test_trials.py").write_text(
        "def square(x=0):\n    return {'loss': (x - 2) ** 2}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("sweep_test_trials", None)


def test_cli_prints_trials_and_best_as_json(tmp_path, capsys, trial_module):
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({**grid([1, 2, 4]), "trial": "sweep_test_trials:square"}))
    assert sweep.cli(Namespace(config=str(path), jobs=2, json=True)) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["best"]["params"] == {"x": 2} and len(out["trials"]) == 3
    assert sweep.cli(Namespace(config=str(path), jobs=1, json=False)) == 0
    assert "<- best" in capsys.readouterr().out


def test_run_command_runs_the_terminals_command_and_reads_its_result(
    tmp_path, trial_module, monkeypatch
):
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # where the command imports the trial from
    path = tmp_path / "optim.config"
    path.write_text(
        '{"algorithm": "grid",  # Comet\'s format, as the report writes it\n'
        '"parameters": {"x": {"type": "discrete", "values": [1, 2, 4],},},\n'
        '"spec": {"metric": "loss", "objective": "minimize",},\n'
        '"trial": "sweep_test_trials:square",}\n'
    )
    result = sweep.run_command(f"python -m course_utils sweep -j 2 {shlex.quote(str(path))}")
    assert result.jobs == 2 and [t.params["x"] for t in result.trials] == [1, 2, 4]
    assert result.best.params == {"x": 2} and result.metric == "loss"
    assert result.mean_by("x", "loss") == {1: 1, 2: 0, 4: 4}


def test_run_command_raises_the_commands_config_error_naming_the_line(tmp_path):
    path = tmp_path / "optim.config"
    path.write_text('{"algorithm": "grid",\n"parameters": {\n')
    with pytest.raises(sweep.SweepConfigError, match="line 2 .*ends before every"):
        sweep.run_command(f"python -m course_utils sweep -j 2 {shlex.quote(str(path))} --json")
    with pytest.raises(ValueError, match="runs `python -m course_utils sweep"):
        sweep.run_command("comet optimize -j 4 train.py optim.config")


def test_an_interrupt_stops_the_command_and_every_trial_it_started(tmp_path, monkeypatch):
    (tmp_path / "sweep_test_sleepers.py").write_text(
        "import os, pathlib, time\n"
        "def sleep(x=0, folder=''):\n"
        "    pathlib.Path(folder, str(os.getpid())).touch()\n"
        "    time.sleep(60)\n"
        "    return {'loss': x}\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # where the command imports the trial from
    pids = tmp_path / "pids"
    pids.mkdir()
    path = tmp_path / "sleep.json"
    parameters = {"x": {"values": [1, 2]}, "folder": {"values": [str(pids)]}}
    path.write_text(
        json.dumps({**GOOD, "parameters": parameters, "trial": "sweep_test_sleepers:sleep"})
    )

    def interrupt_once_both_run(signum, frame):
        if len(list(pids.iterdir())) == 2 or time.monotonic() > deadline:
            raise KeyboardInterrupt

    deadline = time.monotonic() + 30
    previous = signal.signal(signal.SIGALRM, interrupt_once_both_run)
    signal.setitimer(signal.ITIMER_REAL, 0.2, 0.2)
    try:
        with pytest.raises(KeyboardInterrupt):
            sweep.run_command(f"python -m course_utils sweep -j 2 {shlex.quote(str(path))}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    trials = [int(p.name) for p in pids.iterdir()]
    assert len(trials) == 2
    end = time.monotonic() + 5  # the command's children, not this process's: watched by pid
    while any(_alive(pid) for pid in trials) and time.monotonic() < end:
        time.sleep(0.05)
    assert not [pid for pid in trials if _alive(pid)]


def _alive(pid: int) -> bool:
    try:  # a zombie waiting for init to reap it has ended too
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_cli_refuses_a_bad_config_naming_the_key(tmp_path, capsys):
    path = tmp_path / "bad.json"
    config = {**grid([1]), "parameters": {"batch_size": {"values": [8]}}}
    path.write_text(json.dumps({**config, "spec": {"metric": "val_loss", "objective": "up"}}))
    assert sweep.cli(Namespace(config=str(path), jobs=2, json=True)) == 2
    assert "spec.objective" in capsys.readouterr().err
    assert sweep.cli(Namespace(config=str(tmp_path / "none.json"), jobs=2, json=True)) == 2
    path.write_text("{not json")
    assert sweep.cli(Namespace(config=str(path), jobs=2, json=True)) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_finished_trials_are_every_trial_or_an_error_naming_the_failures():
    config = {"spec": {"metric": "val_loss", "objective": "minimize"}}
    done = sweep.Trial(0, {"lr": 0.1}, metrics={"val_loss": 1.0})
    result = sweep.SweepResult(config, jobs=1, seconds=1.0, trials=[done])
    assert result.finished() == [done]
    result.trials.append(sweep.Trial(1, {"lr": 9.0}, error="ValueError: loss is nan"))
    with pytest.raises(RuntimeError, match=r"1 trial\(s\) failed, first: ValueError: loss is nan"):
        result.finished()
