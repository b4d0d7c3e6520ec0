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


def test_server_scaling_verdicts_fail_where_the_effect_is_absent():
    from course_utils.param_server import scaling

    grows = {(2, 1): 0.28, (4, 1): 0.48, (2, 2): 0.19, (4, 2): 0.29}
    assert scaling.grows_with_workers(grows).ok and scaling.sharding_cuts(grows).ok
    flat = {
        (2, 1): 0.28,
        (4, 1): 0.29,
        (2, 2): 0.28,
        (4, 2): 0.29,
    }  # a server that is not the bottleneck
    assert not scaling.grows_with_workers(flat).ok and not scaling.sharding_cuts(flat).ok
    assert scaling.step_time_chart(grows, "emulated").axes[0].get_title().startswith("2 to 4")
