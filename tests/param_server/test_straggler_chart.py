"""The straggler chart stays readable: a run 10x longer does not squeeze the others flat."""

from __future__ import annotations

from types import SimpleNamespace

from course_utils.param_server.charts import ps_loss_curves


def _run(mode, seconds, final):
    return SimpleNamespace(
        mode=mode, snapshot_updates=[0, 10, 20], snapshot_seconds=[0.01, seconds / 2, seconds],
        loss=[2.3, 1.5, final],
    )  # fmt: skip


def test_time_axis_is_logarithmic_and_title_comes_from_the_runs():
    runs = {"sync": _run("sync", 0.3, 1.0), "sync, straggler": _run("sync", 3.3, 1.0),
            "async, straggler": _run("async", 0.35, 1.2)}  # fmt: skip
    fig = ps_loss_curves(runs)
    assert fig.axes[1].get_xscale() == "log"
    title = fig._suptitle.get_text()
    assert "first to finish: sync (0.3 s" in title and "3.3 s for sync, straggler" in title
