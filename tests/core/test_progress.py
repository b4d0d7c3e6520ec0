"""Progress bars: drawn in the notebook, silent in children, and rank 0's drawn by the parent."""

from __future__ import annotations

import time

import torch.distributed as dist

from course_utils.core import progress
from course_utils.ranks.launch import launch
from course_utils.sgd import sweep


def test_outside_a_notebook_bars_are_silent_unless_asked():
    assert not progress.in_notebook()
    assert isinstance(progress.bar(3, "x"), progress.NullBar)
    shown = progress.bar(3, "x", show=True)
    assert not isinstance(shown, progress.NullBar) and shown.total == 3  # tqdm.auto's bar
    shown.close()


def test_a_remote_bar_is_redrawn_by_its_mirror():
    mirror = progress.Mirror(show=True)
    remote = progress.RemoteBar(mirror, 4, "epochs", "epoch")
    remote.started -= progress.DELAY  # as if it had run for a while
    remote.update(1)
    remote.set_postfix(loss=0.5)
    remote.last_sent -= progress.INTERVAL
    remote.update(2)
    assert mirror.drawn.n == 3 and mirror.drawn.total == 4
    remote.close()
    assert mirror.drawn is None  # closed with the remote bar


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
    return dist.get_rank()


def test_rank_0_reports_its_bar_to_the_parent_and_the_others_stay_silent(monkeypatch):
    seen = []
    monkeypatch.setattr(progress.Mirror, "__call__", lambda self, state: seen.append(state))
    assert launch(_three_steps, 2, backend="gloo") == [0, 1]
    assert [s["n"] for s in seen] == [2, 3, 3] and seen[-1].get("closed")
    assert {s["desc"] for s in seen} == {"steps"}  # one bar: rank 1 and the short run sent none


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
