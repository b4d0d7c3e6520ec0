"""Progress bars: drawn in the notebook, silent in children, and rank 0's drawn by the parent."""

from __future__ import annotations

import json
import shlex
import sys
import time
from types import SimpleNamespace

import pytest
import torch.distributed as dist
from recorded_bars import record_bars

from course_utils.core import progress
from course_utils.ranks import processes
from course_utils.ranks.launch import launch
from course_utils.sgd import sweep


def test_outside_a_notebook_bars_are_silent_unless_asked():
    assert not progress.in_notebook()
    assert isinstance(progress.bar(3, "x"), progress.NullBar)
    shown = progress.bar(3, "x", show=True)
    assert not isinstance(shown, progress.NullBar) and shown.total == 3  # tqdm.auto's bar
    shown.close()


def test_a_line_bar_waits_its_first_second_then_sends_at_most_every_interval(monkeypatch, capsys):
    now = [0.0]
    monkeypatch.setattr(progress, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setenv(progress.LINES_VAR, "1")
    with progress.bar(3, "short", "step") as short:  # a run within its first second
        short.update(3)
    assert capsys.readouterr().err == ""  # sends nothing, not even its closing
    steps = progress.bar(5, "epochs", "epoch")
    assert isinstance(steps, progress.LineBar)
    for at in (0.5, progress.DELAY, progress.DELAY + 0.1, progress.DELAY + 2 * progress.INTERVAL):
        now[0] = at
        steps.update(1)  # sent: the second and the fourth
    steps.set_postfix(loss=0.5)
    steps.close()
    lines = capsys.readouterr().err.splitlines()
    sent = [json.loads(line.removeprefix(progress.PREFIX)) for line in lines]
    assert [(s["n"], s.get("closed", False)) for s in sent] == [(2, False), (4, False), (4, True)]
    bars, mirror = record_bars(monkeypatch), progress.Mirror()
    assert not mirror.feed("trial 2 failed: ValueError")  # not a bar's: the caller keeps it
    assert all(mirror.feed(line) for line in lines)
    assert (bars[0].total, bars[0].n, bars[0].closed) == (5, 4, True)


def _three_steps() -> int:
    bar = progress.bar(3, "steps", "step", show=True)
    bar.update(1)  # within the first second: not sent
    time.sleep(progress.DELAY)
    for _ in range(2):
        bar.update(1)
        time.sleep(progress.INTERVAL)
    bar.close()
    short = progress.bar(3, "short", "step", show=True)
    short.update(3)
    short.close()  # never sent, so never drawn
    print("done")
    return dist.get_rank()


def test_rank_0_reports_its_bar_to_the_parent_and_the_others_stay_silent(monkeypatch, capfd):
    seen = []
    monkeypatch.setattr(progress.Mirror, "__call__", lambda self, state: seen.append(state))
    assert launch(_three_steps, 2, backend="gloo") == [0, 1]
    assert [s["n"] for s in seen] == [2, 3, 3] and seen[-1].get("closed")
    assert {s["desc"] for s in seen} == {"steps"}  # one bar: rank 1 and the short run sent none
    out, err = capfd.readouterr()
    assert "[rank 0] done" in out and "[rank 1] done" in out  # what the ranks print still shows
    assert progress.PREFIX not in out + err  # the bar's lines are drawn, never printed


def _fast(x: int = 0) -> dict:
    return {"loss": x}


def test_a_sweep_counts_its_finished_trials_on_one_bar(monkeypatch):
    counted = []

    class Counting(progress.NullBar):
        def update(self, n=1):
            counted.append(n)

    monkeypatch.setattr(sweep.progress, "bar", lambda total, desc, unit: Counting())
    config = {
        "algorithm": "grid",
        "parameters": {"x": {"values": [1, 2, 3]}},
        "spec": {"metric": "loss", "objective": "minimize"},
    }
    sweep.run(config, jobs=2, trial=_fast)
    assert sum(counted) == 3


def test_a_bar_closes_when_its_block_ends_even_by_an_error(monkeypatch):
    bars = record_bars(monkeypatch)  # recorded bars close as NullBar's stand-ins do
    with pytest.raises(ZeroDivisionError), progress.bar(3, "steps", "step") as bar:
        bar.update(1)
        raise ZeroDivisionError
    assert bars[0].closed and bars[0].n == 1


def test_the_sweep_command_draws_its_bar_of_trials_here(tmp_path, monkeypatch):
    trials = "import time\ndef square(x=0):\n    time.sleep(0.6)\n    return {'loss': x}\n"
    (tmp_path / "progress_test_trials.py").write_text(trials)  # 2 at a time: past DELAY
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # where the command imports the trial from
    path = tmp_path / "optim.config"
    config = {
        "algorithm": "grid",
        "parameters": {"x": {"values": [1, 2, 3, 4]}},
        "spec": {"metric": "loss", "objective": "minimize"},
        "trial": "progress_test_trials:square",
    }
    path.write_text(json.dumps(config))
    bars = record_bars(monkeypatch)
    result = sweep.run_command(f"python -m course_utils sweep -j 2 {shlex.quote(str(path))}")
    assert len(result.trials) == 4 and result.best.params == {"x": 1}
    assert [(b.desc, b.unit, b.total, b.n, b.closed) for b in bars] == [
        ("trials, 2 at a time", "trial", 4, 4, True)
    ]


def test_a_command_keeps_its_other_error_lines_and_a_full_stdout_does_not_stall_it(monkeypatch):
    states = [{"total": 2, "desc": "trials", "unit": "trial", "n": n} for n in (0, 1, 2)]
    said = [progress.PREFIX + json.dumps(s) for s in states[:2]] + ["trial 1 failed: ValueError"]
    said.append(progress.PREFIX + json.dumps({**states[2], "closed": True}))
    script = (
        "import sys; sys.stdout.write('x' * 300_000); sys.stdout.flush(); "
        f"sys.stderr.write({chr(10).join(said)!r} + chr(10))"
    )
    bars, mirror = record_bars(monkeypatch), progress.Mirror()
    done = processes.run_command([sys.executable, "-c", script], on_error_line=mirror.feed)
    assert done.returncode == 0 and len(done.stdout) == 300_000  # a pipe holds 64 kB
    assert done.stderr == b"trial 1 failed: ValueError\n"
    assert [(b.total, b.n, b.closed) for b in bars] == [(2, 2, True)]
