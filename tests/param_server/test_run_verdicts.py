"""07's verdicts on the server's runs, fed runs as the notebook makes them: each passes on
the run that shows its effect and prints ✗ on one without it (the other mode, no
straggler, no kill). Small runs: 16 hidden units, batches of 16, a few dozen updates."""

from __future__ import annotations

import pytest

from course_utils.core import data, profiles
from course_utils.core.models import build
from course_utils.network import wire
from course_utils.param_server import verdicts
from course_utils.param_server.charts import ps_loss_curves
from course_utils.param_server.runs import (
    PSRun,
    allreduce_training,
    run_parameter_server,
    serial_twin,
)
from course_utils.param_server.scaling import predicted_seconds
from course_utils.param_server.server import ServerConfig, WorkerLost

SMALL = {"hidden": 16, "batch_size": 16, "worker_timeout": 2.0, "timeout": 30.0}
# the fast workers pause 5 ms a gradient, the straggler 50: the fast ones' pace, not the
# machine's, sets how many updates pass during one of the straggler's gradients (about 20),
# so it is far staler on an idle machine and a busy one alike, and it still delivers a few
# gradients within 60 updates (with fast workers that do not pause, an idle machine ran all
# 60 before the straggler's first 0.1 s gradient arrived)
STRAGGLER = (0.005, 0.005, 0.05)
# for the time verdict the straggler pauses 100 ms, so that the synchronous run's 10 rounds
# (1 s) stay over twice the asynchronous one's even when a busy machine slows the fast
# workers (3.1x with 50 ms beside three busy loops on 2 cores, 5x idle). The world without
# a straggler: every worker as slow as it. The pauses, not the machine, then set both times
# (10 rounds of 100 ms against 10 gradients of 100 ms per worker), within 2x of each other
# however busy the machine is; with no pauses both runs took 0.05-0.1 s and a busy CI
# machine's scheduling set the ratio (2.07x once)
SLOW_STRAGGLER = (0.005, 0.005, 0.1)
EQUAL = (0.1, 0.1, 0.1)
EQUAL_FAST = (0.005, 0.005, 0.005)


@pytest.fixture(scope="module")
def mnist():
    return data.mnist1d()


def _run(mnist, mode, updates, **extra):
    return run_parameter_server(
        ServerConfig(mode=mode, workers=3, updates=updates, **SMALL, **extra), mnist
    )


def _gaps(cfg, run, mnist):
    ring = max(
        (r["params"] - run.params).abs().max().item() for r in allreduce_training(cfg, mnist)
    )
    return ring, (serial_twin(cfg, mnist) - run.params).abs().max().item()


def test_only_a_synchronous_server_agrees_with_one_process(mnist, capsys):
    for mode, agrees in (("sync", True), ("async", False)):
        cfg = ServerConfig(mode=mode, workers=3, updates=15, **SMALL)
        run = run_parameter_server(cfg, mnist)
        assert bool(verdicts.sync_agrees_with_one_process(*_gaps(cfg, run, mnist))) is agrees
    assert "✗ a synchronous server, an allreduce and one process" in capsys.readouterr().out


def test_staleness_verdicts_fail_on_the_other_mode_and_without_a_straggler(mnist, capsys):
    """The equal workers pause as the straggler run's fast ones do: without pauses, on a
    busy machine, two of the three got no core for 0.9 s, the third pushed the last 25
    updates alone, and the mean staleness fell to 1.07 (2026-11-30, three test workers)."""
    sync, equal = _run(mnist, "sync", 10), _run(mnist, "async", 60, delays=EQUAL_FAST)
    assert verdicts.sync_never_stale(sync) and not verdicts.sync_never_stale(equal)
    assert verdicts.async_about_workers_minus_one_stale(equal, 3)
    assert not verdicts.async_about_workers_minus_one_stale(sync, 3)
    straggling = _run(mnist, "async", 60, delays=STRAGGLER)
    assert verdicts.straggler_far_staler(straggling, 3, 3)
    assert not verdicts.straggler_far_staler(equal, 3, 3)
    out = capsys.readouterr().out
    assert "✗ a synchronous server never" in out and "✗ with equal asynchronous" in out
    assert "✗ the straggler's gradients" in out


def test_a_straggler_slows_the_synchronous_server_only_when_there_is_one(mnist, capsys):
    slow_sync = _run(mnist, "sync", 10, delays=SLOW_STRAGGLER)
    slow_async = _run(mnist, "async", 30, delays=SLOW_STRAGGLER)
    assert verdicts.straggler_slows_sync(slow_sync, slow_async)
    equal_sync = _run(mnist, "sync", 10, delays=EQUAL)
    equal_async = _run(mnist, "async", 30, delays=EQUAL)
    assert not verdicts.straggler_slows_sync(equal_sync, equal_async)
    # no link set: the runs are on the real clock, and the line says so
    assert "✗ real clock: with a straggler, the synchronous server" in capsys.readouterr().out


def test_the_kill_verdicts_fail_when_no_worker_was_killed(mnist, capsys):
    kill = {"kill_worker": 2, "kill_after": 5}
    # 150 updates: enough for the test loss to fall by more than the verdict's 0.3 (by 0.46)
    assert verdicts.async_survives_a_lost_worker(_run(mnist, "async", 150, **kill), 150, 2)
    assert not verdicts.async_survives_a_lost_worker(_run(mnist, "async", 150), 150, 2)
    cfg = ServerConfig(mode="sync", workers=3, updates=30, **SMALL, **kill)
    with pytest.raises(WorkerLost) as caught:
        run_parameter_server(cfg, mnist)
    assert verdicts.sync_names_the_lost_worker(caught.value, cfg, 2)
    assert not verdicts.sync_names_the_lost_worker(None, cfg, 2)  # it finished
    assert not verdicts.sync_names_the_lost_worker(caught.value, cfg, 3)  # another worker
    out = capsys.readouterr().out
    assert "✗ asynchronous training applied every update" in out
    assert out.count("✗ the synchronous server raised") == 2


@pytest.mark.parametrize("name", sorted(profiles.PROFILES))
def test_every_profiles_straggler_outlasts_a_synchronous_update_on_its_link(name):
    # the gpu profile's 40 ms against its hidden-256 model's 0.12 s updates gave 1.5x, and
    # 07's straggler verdict printed ✗ on its own world (run with the gpu sizes on 2 cores)
    sizes = profiles.PROFILES[name].param_server
    net = build(sizes.model, (40,), 10, hidden=sizes.hidden, seed=0)
    model_bytes = sum(p.numel() * p.element_size() for p in net.parameters())
    link = wire.resolve(profiles.PROFILES[name].simulated_link)
    assert sizes.straggler_delay > predicted_seconds(link, model_bytes, sizes.workers, 1)


def test_times_on_two_clocks_are_neither_compared_nor_drawn_together():
    one_look = {"loss": [2.3], "snapshot_updates": [0]}
    on_the_wire = PSRun("sync", 3, seconds=2.0, clock="simulated", snapshot_seconds=[2], **one_look)
    here = PSRun("async", 3, seconds=0.5, snapshot_seconds=[0.5], **one_look)  # real clock
    with pytest.raises(ValueError, match="on the real and the simulated clock"):
        verdicts.straggler_slows_sync(on_the_wire, here)
    with pytest.raises(ValueError, match="on the real and the simulated clock"):
        ps_loss_curves({"sync": on_the_wire, "async": here})
