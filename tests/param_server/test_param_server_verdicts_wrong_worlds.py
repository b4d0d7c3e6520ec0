"""Notebook 07's verdicts on traffic, shards, the learning rate and epochs, run through the
notebook's own runs (`traffic`, `scaling.step_seconds`, `tuning.lr_sweep`) in a world with one
slip: each prints ✗ there, and ✓ in the right world at the same small sizes.

The other verdicts of 07 have their wrong worlds in test_run_verdicts.py (the other mode, no
straggler, no kill) and test_local_sgd_verdicts.py. `scaling.grows_with_workers` has none
here: a world where one server's time does not grow with its workers (workers whose compute
outlasts the wire) needs two more worker counts, four launches over the link in each world.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.distributed as dist

from course_utils.core import data, profiles
from course_utils.core.sizes import ParamServerSizes
from course_utils.network import wire
from course_utils.parallel import allreduce
from course_utils.parallel import parameter_server as ps
from course_utils.param_server import runs, scaling, tuning, verdicts
from course_utils.param_server.runs import PSRun, run_parameter_server

CPU = profiles.get("cpu").param_server


@pytest.fixture(scope="module")
def mnist():
    return data.mnist1d()


# --- traffic: the server's bytes grow like its workers, the ring's level off ---------------

TRAFFIC = ParamServerSizes(
    hidden=16, batch_size=16, timeout=30.0, traffic_workers=(2, 4), traffic_updates=2
)


@pytest.fixture(scope="module")
def traffic_worlds(mnist):
    """`traffic` as the notebook runs it, then with the slip. The slip is in the allreduce
    alone, so the wrong world reuses the right world's server runs."""
    servers = {}

    def kept(cfg, data, **kw):
        servers[cfg.workers] = run_parameter_server(cfg, data, **kw)
        return servers[cfg.workers]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runs, "run_parameter_server", kept)
        right = runs.traffic(TRAFFIC, mnist)
        mp.setattr(runs, "run_parameter_server", lambda cfg, data, **kw: servers[cfg.workers])
        mp.setattr(runs, "ring_allreduce", allreduce.parameter_server_allreduce)
        wrong = runs.traffic(TRAFFIC, mnist)
    return right, wrong


def _levels_off(moved):
    server, ring_rank = moved["parameter server"], moved["one ring-allreduce rank"]
    return verdicts.server_grows_ring_levels_off(TRAFFIC.traffic_workers, server, ring_rank)


def test_an_allreduce_that_sums_on_rank_0_does_not_level_off(traffic_worlds, capsys):
    """The slip: the allreduce baseline is notebook 05's parameter-server allreduce (every
    rank sends to rank 0, which sends the sum back) in place of the ring. Bytes per update
    of the busiest rank, 2 and 4 ranks: ring 8784 and 13180 (x1.5), through rank 0 8784 and
    26352 (x3, like N - 1); the server's 22000 and 44000 in both worlds."""
    right, wrong = traffic_worlds
    assert _levels_off(right)
    assert not _levels_off(wrong)
    assert capsys.readouterr().out.splitlines()[-1].startswith("✗ the server's bytes per update")


# --- shards: sharding the server cuts its time per update, as the alpha-beta model says -----

# 3 workers, 1 and 3 shards: the most workers and shards the two verdicts compare. A small
# model over a slow link, so that the wire, not the shared cores, sets the time; 6 updates,
# as the cpu profile's, so that the first update (every worker's gradient arriving at once,
# which the model's steady state leaves out) adds under 10%. Measured / predicted, right
# world, 5 runs each: 1.14-1.16 at (3, 1) and 1.08-1.17 at (3, 3); beside two busy loops
# 1.12-1.20 and 1.01-1.07.
LINK = wire.resolve("50mbit,0.5ms")
LAYOUT = {"hidden": 128, "updates": 6, "link": LINK}


def _work_shard_by_shard(next_gradient, params, shards):
    """`parameter_server.work` with one slip: it pushes its slice to a server and waits for
    that server's reply before pushing to the next, so the shards serve one after another."""
    versions, serving, pushed = [0] * len(shards), set(range(len(shards))), 0
    while serving:
        grad = next_gradient(params)
        for s in sorted(serving):
            a, b = shards[s]
            header = torch.tensor([ps.GRADIENT, versions[s]], device=grad.device)
            dist.send(torch.cat([header, grad[a:b]]), s)
            reply = torch.empty(ps.HEADER + b - a, device=params.device)
            dist.recv(reply, s)
            if reply[0] == ps.STOP:
                serving.discard(s)
            else:
                versions[s], params[a:b] = int(reply[1]), reply[ps.HEADER :]
        pushed += 1
    for s, (a, b) in enumerate(shards):
        goodbye = torch.zeros(ps.HEADER + b - a, device=params.device)
        goodbye[0] = ps.BYE
        dist.send(goodbye, s)
    return pushed


@pytest.fixture(scope="module")
def layouts(mnist):
    """`scaling.step_seconds` as the notebook runs it, then with the slip. With one server
    the slip is what `work` does, so the wrong world reuses the right world's 1-shard run."""
    one_shard = {}

    def kept(cfg, data, **kw):
        run = run_parameter_server(cfg, data, **kw)
        if cfg.servers == 1:
            one_shard[cfg.workers] = run
        return run

    def reused(cfg, data, **kw):
        if cfg.servers == 1:
            return one_shard[cfg.workers]
        return run_parameter_server(cfg, data, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scaling, "run_parameter_server", kept)
        right = scaling.step_seconds(CPU, mnist, (3,), (1, 3), **LAYOUT)
        mp.setattr(scaling, "run_parameter_server", reused)
        mp.setattr(ps, "work", _work_shard_by_shard)
        wrong = scaling.step_seconds(CPU, mnist, (3,), (1, 3), **LAYOUT)
    return right, wrong


def test_a_worker_that_waits_for_each_shard_in_turn_gets_no_cut_and_misses_the_model(
    layouts, capsys
):
    """The slip: a worker pushes to one shard and waits for its reply before the next
    (`_work_shard_by_shard`). ms per update, 3 workers, 1 and 3 shards (model 61 and 32.5):
    right world 70-71 and 34-36 (cut x2.0), wrong world 70-71 and 64-68.5 (x1.1, twice the
    model)."""
    right, wrong = layouts
    assert scaling.sharding_cuts(right.seconds)
    # the right world is 1.01-1.20 x the model here, within the verdict's 25% but too close
    # to it for a test that shares 2 cores with two others: the notebook shows its ✓
    assert not scaling.sharding_cuts(wrong.seconds)
    assert not scaling.matches_prediction(wrong.seconds, wrong.predicted(LINK))
    out = capsys.readouterr().out.splitlines()
    assert out[-2].startswith("✗ simulated clock: sharding the server over 3 ranks")
    assert out[-1].startswith("✗ simulated clock: every time per update is within 25%")


# --- the learning rate and epochs, chosen on validation ---------------------------------------

# the cpu profile's runs (hidden 64, batches of 32, 300 gradients, 3 workers) at two of its
# rates and one seed: the asynchronous runs are the cost, 1 s each
SWEEP = replace(CPU, lr_grid=(0.3, 1.0), lr_seeds=(0,))


@pytest.fixture(scope="module")
def split(mnist):
    return tuning.validation_split(mnist, SWEEP.val_fraction)


@pytest.fixture(scope="module")
def swept(split):
    """The right world's sweep, shared by the three verdicts, and its runs by their config."""
    done = {}
    run_once = tuning._run

    def kept(cfg, data):
        done[cfg] = run_once(cfg, data)
        return done[cfg]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tuning, "_run", kept)
        sweep = tuning.lr_sweep(SWEEP, split, SWEEP.lr_grid, SWEEP.lr_seeds, SWEEP.gradients)
    return sweep, done


@pytest.fixture(scope="module")
def sweep(swept):
    return swept[0]


def _lr_verdicts(sweep):
    val_loss = {method: sweep.val_loss(method) for method in tuning.METHODS}
    chosen = {method: sweep.chosen(method) for method in val_loss}
    return (
        verdicts.async_needs_smaller_lr(chosen),
        verdicts.async_breaks_at_sync_rate(SWEEP.lr_grid, val_loss, chosen),
    )


def _epochs_verdict(sweep, split):
    curves = {
        method: tuning.mean_curve(sweep.runs_at_chosen(method), len(split.train), SWEEP.batch_size)
        for method in ("synchronous", "asynchronous")
    }
    reach = {method: tuning.epochs_to(c, SWEEP.target_loss) for method, c in curves.items()}
    return tuning.epochs_within(reach["asynchronous"], reach["synchronous"])


def _async_swept_as(method, split, swept, monkeypatch):
    """The sweep with `METHODS["asynchronous"]` set to `method`. Each of its runs has the
    config of a run the right world made in this process, which is deterministic: it is
    taken from there."""
    done = swept[1]
    monkeypatch.setitem(tuning.METHODS, "asynchronous", method)
    monkeypatch.setattr(tuning, "_run", lambda cfg, data: done[cfg])
    return tuning.lr_sweep(SWEEP, split, SWEEP.lr_grid, SWEEP.lr_seeds, SWEEP.gradients)


def test_an_asynchronous_method_run_synchronously_needs_no_smaller_rate(
    sweep, swept, split, monkeypatch, capsys
):
    """The slip: the sweep's asynchronous method is run in synchronous mode, ("sync", None)
    in `METHODS`. Validation loss at lr 0.3 and 1.0: synchronous 1.67, 1.59 (chooses 1.0);
    asynchronous 1.54-1.66, 2.07-2.27 in the right world (chooses 0.3; 8 sweeps, 3 of them
    beside two busy loops), the synchronous losses in the wrong one (chooses 1.0 too)."""
    assert all(_lr_verdicts(sweep))
    needs_smaller, breaks = _lr_verdicts(_async_swept_as(("sync", None), split, swept, monkeypatch))
    assert not needs_smaller and not breaks
    out = capsys.readouterr().out.splitlines()
    assert out[-2].startswith("✗ on validation loss, asynchronous SGD's best learning rate")
    assert out[-1].startswith("✗ at synchronous SGD's chosen rate, asynchronous SGD's")


def test_asynchronous_sgd_with_no_stale_gradient_does_not_break_at_the_sync_rate(
    sweep, swept, split, monkeypatch, capsys
):
    """The slip: the sweep's asynchronous method has one worker, ("async", 1) in `METHODS`,
    so no gradient is stale. At synchronous SGD's rate, 1.0, its validation loss is the lone
    worker's, 1.58, against 2.07-2.27 with three workers (the right world's; the bar is
    1.79). Its chosen rate stays 0.3, below synchronous SGD's 1.0: a lone worker with a
    third of the batch also prefers the smaller rate, so `async_needs_smaller_lr` holds here
    and the other test's slip is the one it fails on."""
    assert _lr_verdicts(sweep)[1]
    _, breaks = _lr_verdicts(_async_swept_as(("async", 1), split, swept, monkeypatch))
    assert not breaks
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("✗ at synchronous SGD's chosen rate, asynchronous SGD's")


def test_epochs_counted_as_updates_put_synchronous_sgd_three_times_ahead(
    sweep, split, monkeypatch, capsys
):
    """The slip: epochs counted from updates, as if a synchronous update cost one gradient
    and not one per worker (`PSRun.snapshot_gradients`). Epochs to validation loss 1.65:
    synchronous 0.72, asynchronous 0.65-0.9 (within 1.5 x); with the slip synchronous 0.24."""
    assert _epochs_verdict(sweep, split)
    monkeypatch.setattr(PSRun, "snapshot_gradients", property(lambda run: run.snapshot_updates))
    assert not _epochs_verdict(sweep, split)
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("✗ each at its chosen rate, asynchronous and synchronous SGD")
