"""The traffic, learning-rate and epoch verdicts fail where their effect is absent; the
lr is chosen on validation only."""

from __future__ import annotations

import math

import pytest
import torch

from course_utils.core import data
from course_utils.core.sizes import ParamServerSizes
from course_utils.param_server import charts, tuning, verdicts
from course_utils.param_server.runs import PSRun, run_parameter_server, server_config


def test_server_bytes_grow_in_proportion_and_ring_bytes_level_off_or_the_verdict_fails():
    ring = [59, 79, 89]  # 2(N-1)/N
    verdict = verdicts.server_grows_ring_levels_off
    assert verdict((2, 3, 4), [119, 178, 238], ring).ok
    assert not verdict((2, 3, 4), [119, 119, 119], ring).ok
    assert not verdict((2, 3, 4), [119, 240, 480], ring).ok
    assert not verdict((2, 3, 4), [119, 178, 238], [59, 89, 118]).ok  # grows like N


LRS = (0.1, 0.3, 1.0)


def test_lr_verdicts_fail_where_async_is_not_harder_to_tune():
    chosen = {"synchronous": 1.0, "asynchronous": 0.3, "one worker alone": 0.3}
    loss = {"synchronous": [1.8, 1.7, 1.6], "asynchronous": [1.6, 1.55, 2.1],
            "one worker alone": [1.6, 1.4, 1.55]}  # fmt: skip
    assert verdicts.async_needs_smaller_lr(chosen).ok
    assert verdicts.async_breaks_at_sync_rate(LRS, loss, chosen).ok
    same = {**chosen, "asynchronous": 1.0}
    assert not verdicts.async_needs_smaller_lr(same).ok
    tame = {**loss, "asynchronous": [1.6, 1.55, 1.65]}
    assert not verdicts.async_breaks_at_sync_rate(LRS, tame, chosen).ok


def test_epochs_to_the_target_and_their_verdict():
    curve = ([0.0, 0.5, 1.0, 1.5], [2.3, 1.9, 1.65, 1.5])
    assert tuning.epochs_to(curve, 1.7) == 1.0 and tuning.epochs_to(curve, 1.0) == math.inf
    assert tuning.epochs_within(1.0, 0.8).ok and tuning.epochs_within(0.8, 1.0).ok
    assert not tuning.epochs_within(2.0, 0.8).ok  # async needs far more
    assert not tuning.epochs_within(math.inf, 0.8).ok  # async never gets there
    title = charts.loss_by_epochs({"a": curve}, 1.7, {"a": 1.0}).axes[0].get_title()
    assert title == "epochs to validation loss 1.7: a 1.00"


def _psrun(mode, workers, losses):
    return PSRun(mode, workers, snapshot_updates=[0, 10, 20], loss=losses)


def test_mean_curve_counts_gradients_not_updates():
    runs = [_psrun("sync", 3, [2.0, 1.8, 1.6]), _psrun("sync", 3, [2.0, 1.6, 1.4, 9.9])]
    epochs, loss = tuning.mean_curve(runs, train_samples=960, batch_size=32)
    assert epochs == [0.0, 1.0, 2.0]  # 10 updates x 3 workers x 32 samples = 960
    assert loss == pytest.approx([2.0, 1.7, 1.5])
    assert _psrun("async", 3, [1, 1, 1]).snapshot_gradients == [0, 10, 20]


@pytest.fixture(scope="module")
def mnist():
    return data.mnist1d()


def test_validation_split_is_held_out_of_training(mnist):
    split = tuning.validation_split(mnist, 0.2)
    assert len(split.train) + len(split.test) == len(mnist.train)
    assert len(split.test) == round(0.2 * len(mnist.train))
    rows = {tuple(r.tolist()) for r in split.test.tensors[0][:200]}
    assert not rows & {tuple(r.tolist()) for r in split.train.tensors[0]}
    again = tuning.validation_split(mnist, 0.2)  # seeded: every call holds out the same rows
    assert torch.equal(split.test.tensors[0], again.test.tensors[0])


def test_lr_sweep_chooses_on_validation_and_reports_test_only_there(mnist):
    sizes = ParamServerSizes(hidden=16, batch_size=16, snapshot_every=3, timeout=30.0)
    split = tuning.validation_split(mnist, 0.2)
    sweep = tuning.lr_sweep(sizes, split, (0.1, 0.3), (0, 1), gradients=30)
    assert len(sweep.runs) == 3 * 2 * 2
    for method in tuning.METHODS:
        losses = sweep.val_loss(method)
        assert sweep.chosen(method) == (0.1, 0.3)[losses.index(min(losses))]
        assert all(r.loss for r in sweep.runs_at_chosen(method))
        assert 0 < sweep.test_loss(method, mnist) < 5
    sync = sweep.runs["synchronous", 0.1, 0]
    assert sync.snapshot_updates[-1] == 10 and sync.snapshot_gradients[-1] == 30
    assert sweep.runs["one worker alone", 0.1, 0].snapshot_gradients[-1] == 30
    assert sweep.runs["asynchronous", 0.1, 0].updates == 30  # launched: one update a gradient


def test_in_process_sync_runs_match_the_launched_server(mnist):
    """The sweep runs synchronous training in one process: same snapshots, same losses."""
    sizes = ParamServerSizes(hidden=16, batch_size=16, timeout=30.0)
    split = tuning.validation_split(mnist, 0.2)
    cfg = server_config(sizes, mode="sync", updates=12, snapshot_every=4, lr=0.3)
    launched = run_parameter_server(cfg, split)
    here = tuning._run(cfg, split)
    assert here.snapshot_updates == launched.snapshot_updates == [0, 4, 8, 12]
    assert here.loss == pytest.approx(launched.loss, abs=1e-5)
    assert torch.allclose(here.params, launched.params, atol=1e-6)


def test_a_diverged_rate_is_never_chosen():
    sweep = tuning.LrSweep((0.1, 2.0), (0,))
    sweep.runs = {("m", 0.1, 0): _psrun("async", 3, [2.3, 1.5]),
                  ("m", 2.0, 0): _psrun("async", 3, [2.3, float("nan")])}  # fmt: skip
    assert sweep.chosen("m") == 0.1
    assert charts.lr_sensitivity([0.1, 2.0], {"m": [float("nan"), 1.5]}).axes[0].get_title() == (
        "lowest mean validation loss at lr\n2 (m)"
    )


def test_end_loss_averages_the_last_quarter_of_a_run():
    assert tuning.end_loss(_psrun("async", 3, [2.0, 1.8, 1.6, 1.4, 1.2])) == 1.2
    nine = _psrun("async", 3, [2.0, 1.9, 1.8, 1.7, 1.6, 1.5, 1.4, 1.3, 1.1])
    assert tuning.end_loss(nine) == pytest.approx(1.2)  # the last two of eight steps
    assert tuning.end_loss(_psrun("sync", 3, [2.3])) == 2.3
