"""N ranks averaging gradients equal one process with the N-times batch, and timings add up."""

from __future__ import annotations

import contextlib
import os

import pytest
import torch
from recorded_bars import record_bars
from torch.utils.data import DistributedSampler, TensorDataset
from verdict_lines import fails

from course_utils.core.gpus import visible_gpus
from course_utils.core.training import Recipe, train
from course_utils.ddp import cost as ddp_timing
from course_utils.ddp import equivalence as dp
from course_utils.ddp import experiments as ddp_runs
from course_utils.ddp import verdicts as ddp_verdicts
from course_utils.ddp.data_parallel import data_parallel_vs_one_device
from course_utils.ranks.examples import spread_over_nodes
from course_utils.ranks.launch import launch
from course_utils.ranks.local_nodes import TorchrunJob, run_local_nodes


@pytest.mark.parametrize("world_size, b", [(2, 3), (4, 8), (3, 5)])
def test_twin_batches_are_the_union_of_the_ranks_batches(world_size, b):
    n = 101
    ds = TensorDataset(torch.arange(n), torch.arange(n))
    twin = [batch[0].tolist() for batch in dp.twin_loader(ds, world_size, b, seed=7)]
    shards = [
        list(DistributedSampler(ds, world_size, r, shuffle=True, seed=7, drop_last=True))
        for r in range(world_size)
    ]
    per_rank = [[s[k * b : (k + 1) * b] for k in range(len(s) // b)] for s in shards]
    expected = [sum((per_rank[r][k] for r in range(world_size)), []) for k in range(len(twin))]
    assert twin == expected
    assert len(twin) == len(shards[0]) // b


@pytest.mark.parametrize("mode", ["ddp", "by_hand"])
def test_ranks_end_where_the_one_process_twin_ends(mode):
    result = dp.equivalence(3, mode, dp.Setup(per_rank_batch=4, steps=8, hidden=16))
    assert result.max_abs_diff <= 1e-5
    assert result.ranks_identical
    mean_rank_losses = [sum(step) / len(step) for step in zip(*result.rank_losses, strict=True)]
    assert mean_rank_losses == pytest.approx(result.single_losses, abs=1e-5)


def test_bad_mode_is_refused():
    with pytest.raises(ValueError, match="mode must be"):
        dp.replica_run(dp.Setup(), "carrier pigeon")


def test_timings_count_syncs_buckets_and_communication():
    setup = dp.Setup(hidden=16)
    variants = [
        ddp_timing.Variant("naive", 4),
        ddp_timing.Variant("accumulate", 4, accumulate=4),
        ddp_timing.Variant("accumulate, no no_sync", 4, accumulate=4, no_sync=False),
        ddp_timing.Variant("tiny buckets", 4, bucket_cap_mb=0.0001),
    ]
    naive, accumulate, every_micro, tiny = ddp_timing.measure(variants, 2, 128, setup)
    assert naive.samples == 128 and naive.syncs == 32
    assert accumulate.syncs == 8
    assert every_micro.syncs == 32 and every_micro.samples == 128  # 8 updates, 4 syncs each
    assert 0 < every_micro.communication < every_micro.seconds
    assert naive.buckets == 1 and tiny.buckets > 1
    assert naive.communication > 0 and naive.compute > 0
    single = ddp_timing.measure_single(8, 256, setup)
    assert single.communication == 0 and single.syncs == 32


def test_every_repeat_of_every_variant_shares_one_launch(monkeypatch):
    launches = []

    def counted(fn, world_size, **options):
        launches.append(fn.__name__)
        return launch(fn, world_size, **options)

    monkeypatch.setattr(ddp_timing, "launch", counted)
    setup = dp.Setup(hidden=16)
    variants = [ddp_timing.Variant("naive", 4), ddp_timing.Variant("fp16", 4, hook="fp16")]
    naive, fp16 = ddp_timing.measure(variants, 2, 32, setup, repeats=3)
    single = ddp_timing.measure_single(8, 64, setup, repeats=3)
    assert launches == ["time_rounds", "time_rounds"]  # not one launch per repeat
    assert (naive.name, fp16.name, single.name) == ("naive", "fp16", "one process")
    assert naive.syncs == fp16.syncs == 8 and single.syncs == 8


def _accumulated_parameters(no_sync: bool) -> torch.Tensor:
    setup = dp.Setup(hidden=16)
    d = dp.load_data(setup)
    model = dp.wrap(dp.build_model(setup, d))
    if not no_sync:
        model.no_sync = contextlib.nullcontext  # as cost.time_replica does for the control
    train(model, dp.rank_loader(d.train, 2, setup.seed), Recipe(max_steps=5, accumulate=4, lr=0.05))
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_accumulating_without_no_sync_makes_the_same_update():
    """no_sync's control in 04 is a fair race: it syncs after every micro-batch, and the
    averaged gradients add up to the same update."""
    with_no_sync = launch(_accumulated_parameters, 2, args=(True,))
    every_micro = launch(_accumulated_parameters, 2, args=(False,))
    assert torch.equal(every_micro[0], every_micro[1])
    assert (with_no_sync[0] - every_micro[0]).abs().max() <= 1e-6


def test_allreduces_start_while_earlier_layers_still_backpropagate():
    timeline = ddp_timing.overlap_timeline(layers=4, width=128, batch=64, bucket_cap_mb=0.05)
    first_layer_ready = dict(timeline["layers"])["layer 1"]
    first_allreduce = timeline["allreduces"][0][0]
    assert len(timeline["allreduces"]) > 1
    assert first_allreduce < first_layer_ready


def test_ddp_behaves_like_one_process_at_the_effective_batch():
    setup = dp.Setup(hidden=16, per_rank_batch=8, lr=0.05, num_samples=2000)
    cmp = ddp_runs.compare_with_single(2, setup, epochs=2)
    assert len(cmp.ddp.epoch_val_loss) == 2
    assert cmp.gap_to_effective < cmp.gap_to_per_rank


def test_lr_scaling_rows_cover_fixed_and_scaled_at_every_batch(monkeypatch):
    launches = []

    def counted(fn, world_size, **options):
        launches.append((fn.__name__, len(options["args"][0])))
        return launch(fn, world_size, **options)

    monkeypatch.setattr(ddp_runs, "launch", counted)
    setup = dp.Setup(hidden=16, num_samples=1000)
    rows = ddp_runs.lr_scaling(2, (8, 32), setup, base_lr=0.05, epochs=1)
    seen = {(r.effective_batch, r.scaled): r.lr for r in rows}
    assert seen == {(16, False): 0.05, (16, True): 0.05, (64, False): 0.05, (64, True): 0.2}
    assert all(0 <= r.test_acc <= 1 for r in rows)
    assert launches == [("ddp_trainings", 3)]  # one launch; the base's two rows are one run
    assert rows[0].test_acc == rows[1].test_acc


def test_splitting_a_global_batch_reports_compute_and_communication(monkeypatch):
    bars = record_bars(monkeypatch)
    rows = ddp_runs.split_global_batch(64, (1, 2), dp.Setup(hidden=16), samples_per_rank=256)
    bar = bars[0]  # the kernel's, over the world sizes
    assert (bar.desc, bar.total, bar.n, bar.closed) == ("batch 64 over N ranks", 2, 2, True)
    assert [(r.world_size, r.per_rank_batch) for r in rows] == [(1, 64), (2, 32)]
    assert all(r.compute_per_step > 0 for r in rows)
    assert rows[0].communication_per_step == 0 < rows[1].communication_per_step  # one process


def test_ddp_training_script_runs_as_a_two_node_torchrun_job(monkeypatch):
    bars = record_bars(monkeypatch)  # the job's, and rank 0's relayed through its node's log
    args = ("--epochs", "1", "--per-rank-batch", "64")
    job = TorchrunJob(module="course_utils.ddp.torchrun_train", module_args=args)
    reports = run_local_nodes(job, echo=False)
    assert [r["rank"] for r in reports] == [0, 1]
    assert all(r["world_size"] == 2 and r["samples_per_update"] == 64 for r in reports)
    assert reports[0]["test_acc"] == reports[1]["test_acc"]  # one synchronized model
    assert reports[0]["steps"] == reports[1]["steps"] > 0
    assert spread_over_nodes(reports, nnodes=2, per_node=1).ok
    assert ddp_verdicts.same_parameters(reports).ok
    assert ddp_verdicts.samples_per_update(reports) == 2 * 64
    steps = reports[0]["steps"]
    assert [(b.desc, b.unit, b.total, b.n, b.closed) for b in bars] == [
        ("2-node torchrun job", "node", 2, 2, True),  # the kernel's own, over the agents
        ("DDP on 2 ranks", "update", steps, steps, True),
    ]


# 04's job with one slip: each replica trains without DistributedDataParallel, so the two
# never average their gradients. torchrun's workers are fresh interpreters that no
# monkeypatch reaches, so the slip is a module of its own, on the workers' PYTHONPATH.
UNSYNCED_JOB = """from course_utils.ddp import torchrun_train

torchrun_train.DDP = lambda model: model
torchrun_train.main()
"""


def test_replicas_that_never_average_their_gradients_end_apart(tmp_path, monkeypatch, capsys):
    (tmp_path / "unsynced_ddp.py").write_text(UNSYNCED_JOB)
    paths = [str(tmp_path), os.environ.get("PYTHONPATH")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, paths)))
    args = ("--epochs", "1", "--per-rank-batch", "64")
    reports = run_local_nodes(TorchrunJob(module="unsynced_ddp", module_args=args), echo=False)
    assert [r["rank"] for r in reports] == [0, 1] and reports[0]["steps"] > 0
    fails(capsys, lambda: ddp_verdicts.same_parameters(reports))


def test_data_parallel_needs_two_gpus():
    if visible_gpus().count >= 2:
        pytest.skip("this machine has GPUs")
    assert data_parallel_vs_one_device() is None


def test_one_rank_has_no_compute_to_communication_ratio():
    import math

    from course_utils.ddp.experiments import SplitRow

    assert SplitRow(1, 1024, 0.01, 0.0).ratio == math.inf  # nothing to send: no ratio
    assert SplitRow(4, 256, 0.01, 0.02).ratio == 0.5
