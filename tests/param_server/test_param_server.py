"""The parameter server against its twins (allreduce, one process), and a worker killed for real."""

from __future__ import annotations

import time

import pytest
import torch
from recorded_bars import last_states, record_bars, record_rank_bars

from course_utils.core import data
from course_utils.param_server.local_sgd import AveragingConfig, local_sgd_runs
from course_utils.param_server.runs import allreduce_training, run_parameter_server, serial_twin
from course_utils.param_server.server import ServerConfig, WorkerLost
from course_utils.ranks.launch import live_children

SMALL = {"hidden": 16, "batch_size": 16, "worker_timeout": 2.0, "timeout": 30.0}


@pytest.fixture(scope="module")
def mnist():
    return data.mnist1d()


def test_sync_server_equals_allreduce_and_one_process(mnist):
    cfg = ServerConfig(mode="sync", workers=3, updates=20, **SMALL)
    run = run_parameter_server(cfg, mnist, eval_samples=100)
    ring = allreduce_training(cfg, mnist)
    twin = serial_twin(cfg, mnist)
    assert run.updates == 20 and set(run.staleness) == {0}
    assert torch.allclose(run.params, twin, atol=1e-6)
    assert all(torch.allclose(r["params"], twin, atol=1e-6) for r in ring)
    numel = twin.numel()
    # counted at torch.distributed: every gradient in and parameters out, and each goodbye
    assert run.server_bytes == (20 * 2 * 3 + 3) * (numel + 2) * 4


def test_sharded_server_computes_the_same(mnist):
    cfg = ServerConfig(mode="sync", workers=2, servers=2, updates=10, **SMALL)
    run = run_parameter_server(cfg, mnist, eval_samples=100)
    assert torch.allclose(run.params, serial_twin(cfg, mnist), atol=1e-6)


def test_async_applies_every_update_and_records_staleness(mnist):
    # the fast workers pause 5 ms a gradient, so the straggler's 50 ms gradients arrive
    # within the 60 updates however fast the machine is
    cfg = ServerConfig(mode="async", workers=3, updates=60, delays=(0.005, 0.005, 0.05), **SMALL)
    run = run_parameter_server(cfg, mnist, eval_samples=100)
    assert run.updates == 60 and not run.lost
    assert sum(len(s) for s in run.senders) == 60
    assert all(0 <= s < 60 for s in run.staleness)
    assert max(run.staleness) >= 1  # three workers cannot all be fresh
    assert run.final_loss < run.loss[0]
    straggler = torch.tensor(run.staleness_of(3), dtype=torch.float).median()
    fast = torch.tensor(run.staleness_of(1), dtype=torch.float).median()
    assert straggler > fast


def test_one_async_worker_is_plain_sgd(mnist):
    cfg = ServerConfig(mode="async", workers=1, updates=15, **SMALL)
    run = run_parameter_server(cfg, mnist, eval_samples=100)
    assert set(run.staleness) == {0}
    assert torch.allclose(run.params, serial_twin(cfg, mnist), atol=1e-6)


def test_async_training_survives_a_killed_worker(mnist):
    cfg = ServerConfig(mode="async", workers=3, updates=80, kill_worker=2, kill_after=5, **SMALL)
    run = run_parameter_server(cfg, mnist, eval_samples=100)
    assert run.updates == 80
    assert set(run.lost) == {2} and "SIGKILL" in run.died[2]
    assert set(run.worker_gradients) == {1, 3}
    assert live_children() == []


def test_sync_server_names_the_killed_worker_fast(mnist):
    cfg = ServerConfig(mode="sync", workers=3, updates=50, kill_worker=2, kill_after=5, **SMALL)
    started = time.perf_counter()
    with pytest.raises(WorkerLost, match=r"worker 2 \(rank 2\) did not deliver") as caught:
        run_parameter_server(cfg, mnist)
    assert time.perf_counter() - started < 30
    assert caught.value.rank == 2 and "SIGKILL" in str(caught.value)
    assert live_children() == []


def test_averaging_every_step_is_synchronous_sgd(mnist):
    cfg = AveragingConfig(workers=2, steps=10, hidden=16, batch_size=16, timeout=30.0)
    runs = local_sgd_runs(cfg, mnist, {"every step": (1, True), "once": (None, True)})
    out, once = runs["every step"], runs["once"]
    ps = ServerConfig(mode="sync", workers=2, updates=10, lr=cfg.lr, **SMALL)
    assert out["rounds"] == 10
    assert torch.allclose(out["averaged"], serial_twin(ps, mnist), atol=1e-6)
    assert once["rounds"] == 1
    assert torch.allclose(once["averaged"], sum(once["own"]) / 2, atol=1e-6)


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="mode"):
        ServerConfig(mode="downpour")
    with pytest.raises(ValueError, match="kill_worker"):
        ServerConfig(workers=2, kill_worker=3)


def test_server_0_counts_its_updates_and_the_layouts_count_on_their_own_bar(mnist, monkeypatch):
    from course_utils.param_server import scaling

    states = record_rank_bars(monkeypatch)
    cfg = ServerConfig(mode="async", workers=2, updates=12, **SMALL)
    run_parameter_server(cfg, mnist, eval_samples=10)
    shown = last_states(states)["async server, 2 workers"]
    assert (shown["unit"], shown["total"], shown["n"], shown["closed"]) == ("update", 12, 12, True)
    bars = record_bars(monkeypatch)
    monkeypatch.setattr(scaling, "run_parameter_server", lambda cfg, data, **kw: _fake_run())
    sizes = type("Sizes", (), {"workers": 2, "gradients": 10, "lr": 0.1, "model": "mlp",
                               "snapshot_every": 5, **SMALL})  # fmt: skip
    scaling.step_seconds(sizes, mnist, (2, 4), (1, 2, 4), hidden=16, updates=2, link="real")
    assert [(b.unit, b.total, b.n, b.closed) for b in bars] == [("layout", 6, 6, True)]


def _fake_run():
    return type(
        "Run", (), {"seconds": 1.0, "updates": 2, "shard_bytes": [8], "params": torch.ones(3)}
    )
