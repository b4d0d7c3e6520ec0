"""Every chart of chapter 07 titles itself from its data, and says which link its runs crossed."""

from __future__ import annotations

from types import SimpleNamespace

from course_utils.param_server import charts


def test_traffic_title_gives_each_links_growth():
    fig = charts.ps_traffic([2, 4], {"server": [100.0, 200.0], "ring rank": [50.0, 75.0]})
    assert fig.axes[0].get_title().endswith("server x2.0, ring rank x1.5")


def test_staleness_title_names_the_stalest_and_freshest_and_the_link():
    groups = {"fast": [1, 1, 2], "straggler": [5, 6, 4], "empty": []}
    title = charts.staleness_histogram(groups, subtitle="emulated link").axes[0].get_title()
    assert title.startswith("stalest: straggler (mean 5.0 updates)")
    assert "freshest: fast (mean 1.3)" in title and title.endswith("emulated link")


def test_averaging_title_names_the_best_and_worst_points():
    points = [{"label": "every 1", "rounds": 100, "accuracy": 0.52},
              {"label": "apart", "rounds": 1, "accuracy": 0.15}]  # fmt: skip
    title = charts.averaging_accuracy(points, baseline=0.45).axes[0].get_title()
    assert title == "most accurate: every 1 (0.52); least: apart (0.15)"


def test_updates_by_worker_title_counts_each_workers_gradients():
    run = SimpleNamespace(workers=3, senders=[[1], [2], [1], [3], [1]],
                          update_seconds=[0.1, 0.2, 0.3, 0.4, 0.5], died={2: "killed"})  # fmt: skip
    title = charts.updates_by_worker(run).axes[0].get_title()
    assert title == "gradients applied: worker 1 3, worker 2 (killed) 1, worker 3 1"
