"""Timing over the emulated link: the straggler chart, the sharded server and its prediction."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from course_utils.core import data
from course_utils.network.wire import Link
from course_utils.param_server import scaling
from course_utils.param_server.charts import ps_loss_curves
from course_utils.param_server.runs import run_parameter_server
from course_utils.param_server.server import ServerConfig

LINK = Link(alpha=0.005, bits_per_second=100e6)
M = 1.155e6  # bytes of the notebook's scaling model


def _run(mode, seconds, final):
    return SimpleNamespace(
        mode=mode, snapshot_updates=[0, 10, 20], snapshot_seconds=[0.01, seconds / 2, seconds],
        loss=[2.3, 1.5, final], snapshot_gradients=[0, 10, 20], clock="simulated",
    )  # fmt: skip


def test_time_axis_is_logarithmic_and_title_comes_from_the_runs():
    runs = {"sync": _run("sync", 0.3, 1.0), "sync, straggler": _run("sync", 3.3, 1.0),
            "async, straggler": _run("async", 0.35, 1.2)}  # fmt: skip
    fig = ps_loss_curves(runs, subtitle="emulated 100 Mbit/s link, α = 5 ms")
    assert fig.axes[1].get_xscale() == "log"
    assert fig.axes[0].get_xlabel() == "gradients computed by the workers"
    assert fig.axes[1].get_xlabel() == "training time (simulated clock, s, log scale)"
    title = fig._suptitle.get_text()
    assert "first to finish: sync (0.3 s" in title and "3.3 s for sync, straggler" in title
    assert title.endswith("emulated 100 Mbit/s link, α = 5 ms")


def _table(seconds):
    return scaling.ShardScaling(
        seconds=seconds, shard_bytes={k: 4e6 / k[1] * k[0] for k in seconds}, model_bytes=M
    )


def test_prediction_is_the_server_link_then_one_worker_link():
    one = LINK.wire_seconds(M)
    assert scaling.predicted_seconds(LINK, M, 4, 1) == pytest.approx(5 * one)
    sharded = scaling.predicted_seconds(LINK, M, 4, 4)
    assert sharded == pytest.approx(4 * LINK.wire_seconds(M / 4) + 4 * LINK.alpha + M * LINK.beta)
    assert 5 * one / 4 < sharded < 5 * one / 2  # far from S-fold: the worker's link stays
    assert scaling.predicted_seconds(Link(), M, 4, 4) == 0.0  # the real link: no wire time


def test_sharding_verdicts_pass_on_the_prediction_and_fail_without_the_effect():
    keys = [(w, s) for w in (2, 4) for s in (1, 2, 4)]
    model = {k: scaling.predicted_seconds(LINK, M, *k) for k in keys}
    table = _table(model)
    assert scaling.grows_with_workers(model).ok and scaling.sharding_cuts(model).ok
    assert scaling.matches_prediction({k: 1.1 * v for k, v in model.items()}, model).ok
    flat = dict.fromkeys(keys, 0.28)  # a server that is not the bottleneck
    assert not scaling.grows_with_workers(flat).ok and not scaling.sharding_cuts(flat).ok
    naive = {(w, s): model[w, 1] / s for w, s in keys}  # the S-fold cut the model rules out
    assert not scaling.matches_prediction(naive, model).ok
    title = scaling.step_time_chart(table, model, "emulated").axes[0].get_title()
    assert title.startswith("4 workers, 1 to 4 shards: time /2.") and "model: /2." in title
    assert "bytes per shard's link /4.0" in title and title.endswith("emulated")


def test_on_the_real_link_the_prediction_is_empty_and_nothing_divides_by_it():
    keys = [(w, s) for w in (2, 4) for s in (1, 2)]
    zero = dict.fromkeys(keys, 0.0)
    measured = dict.fromkeys(keys, 0.01)
    assert not scaling.matches_prediction(measured, zero).ok
    title = scaling.step_time_chart(_table(measured), zero, "real link").axes[0].get_title()
    assert "model" not in title and title.endswith("real link")


@pytest.fixture(scope="module")
def mnist():
    return data.mnist1d()


def test_a_straggler_over_the_emulated_link_waits_on_the_link_clock(mnist):
    """Its short sleep is seen by the link's clock (which counts CPU time), so a synchronous
    server over the emulated link waits for it every update."""
    small = {"hidden": 16, "batch_size": 16, "timeout": 30.0, "link": "1000mbit,1ms"}
    sync = ServerConfig(mode="sync", workers=2, updates=10, delays=(0.0, 0.03), **small)
    assert run_parameter_server(sync, mnist, eval_samples=10).seconds >= 9 * 0.03
    # the others pause 5 ms a gradient and the straggler 50: their pace, not the machine's,
    # sets its staleness (a 0.03 s straggler beside workers that never pause tied theirs at
    # 2 with other tests on the cores; a 0.1 s one delivered nothing in 60 updates on an
    # idle machine)
    lazy = ServerConfig(mode="async", workers=3, updates=60, delays=(0.005, 0.005, 0.05), **small)
    run = run_parameter_server(lazy, mnist, eval_samples=10)
    assert sorted(run.staleness_of(3))[len(run.staleness_of(3)) // 2] > max(
        sorted(run.staleness_of(1))[len(run.staleness_of(1)) // 2], 1
    )
