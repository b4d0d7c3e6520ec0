"""Notebook 08's FSDP2 and precision verdicts, run through the notebook's own runs in a world
with one slip, each print ✗.

Each test patches one plausible mistake into how the notebook shards, feeds or trains its
MLP (ranks start with fork, so the patch reaches them), makes the notebook's call at small
sizes on 2 gloo ranks, and feeds the verdict what the notebook feeds it; the right world's
run at the same sizes passes beside it.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn
from verdict_lines import fails, holds

from course_utils.core import profiles
from course_utils.core.data import load
from course_utils.memory import fsdp, fsdp_options, precision, reference, runs, zero
from course_utils.memory import verdicts as v
from course_utils.ranks.bootstrap import device

DEEP = (40, 32, 32, 10)  # every layer's rows split evenly over 2 ranks (ODD's 7 would be padded)
N, LR = 2, 1e-2
X, Y = runs.batches(3, 8)


# ------------------------------------------------------------- FSDP2 against one process


@pytest.fixture(scope="module")
def one_process():
    """08's yardsticks: one process in fp64, and how far one fp32 process drifts from it."""
    exact = reference.one_process(DEEP, X, Y, LR)
    in_fp32 = reference.one_process(DEEP, X, Y, LR, torch.float32)
    return exact, (in_fp32.double() - exact).abs().max().item()


@pytest.fixture(scope="module")
def right_fsdp():
    return fsdp.fsdp_training(DEEP, N, X, Y, LR)


def _numel(widths) -> int:
    return sum(p.numel() for p in zero.mlp(widths).parameters())


def _stores_a_shard(out):
    return v.fsdp_stores_a_shard([f["stored"] for f in out], _numel(DEEP))


def _matches_fp64(out, one_process):
    exact, fp32_gap = one_process
    gaps = {"FSDP2": (out[0]["params"].double() - exact).abs().max().item()}
    return v.every_run_matches_fp64(gaps, fp32_gap)


def _mesh(shape, names=None):
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh(device().type, shape, mesh_dim_names=names)


def _shard_on_replicas(model, **options):
    """`shard_layers` on a 2-D mesh written (N, 1) for (1, N): FSDP2 reads the first
    dimension as replicas (HSDP), so every rank keeps the whole model and shards it over a
    group of one."""
    from torch.distributed.fsdp import fully_shard

    mesh = _mesh((dist.get_world_size(), 1), ("replicate", "shard"))
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh, **options)
    return fully_shard(model, mesh=mesh, **options)


def test_fsdp2_on_a_mesh_of_replicas_stores_the_whole_model(right_fsdp, monkeypatch, capsys):
    """Right: 5,396 B on each rank, half the 10,792 of the model's fp32 parameters; on the
    mesh of replicas 10,792 B on each."""
    holds(capsys, lambda: _stores_a_shard(right_fsdp))
    monkeypatch.setattr(fsdp, "shard_layers", _shard_on_replicas)
    out = fsdp.fsdp_training(DEEP, N, X, Y, LR)
    fails(capsys, lambda: _stores_a_shard(out))


def test_fsdp2_whose_ranks_read_the_same_samples_drifts_from_one_process(
    right_fsdp, one_process, monkeypatch, capsys
):
    """Every rank takes the global batch's first share (`rank_share` without the rank), so
    the model learns half of each batch twice: 0.057 from one fp64 process after 3 steps,
    where the right FSDP2 is 8.5e-08 from it and one fp32 process 8.6e-08 (bound 1e-06)."""
    holds(capsys, lambda: _matches_fp64(right_fsdp, one_process))
    monkeypatch.setattr(fsdp, "rank_share", lambda n: slice(0, n // dist.get_world_size()))
    out = fsdp.fsdp_training(DEEP, N, X, Y, LR)
    fails(capsys, lambda: _matches_fp64(out, one_process))


def _shard_the_whole_model_only(model, **options):
    """`shard_layers` without each layer's own `fully_shard`: one group holds every
    parameter and is gathered at once, so there is no later layer to prefetch."""
    from torch.distributed.fsdp import fully_shard

    return fully_shard(model, mesh=_mesh((dist.get_world_size(),)), **options)


def test_fsdp2_that_shards_only_the_whole_model_prefetches_nothing(right_fsdp, monkeypatch, capsys):
    """Right: layers 0 and 2's backward all-gathers prefetched. One group: no
    `FSDP::backward_prefetch` at all (and its all-gathers name no layer)."""
    holds(capsys, lambda: v.prefetch_seen(right_fsdp[0]["events"]))
    monkeypatch.setattr(fsdp, "shard_layers", _shard_the_whole_model_only)
    out = fsdp.fsdp_training(DEEP, N, X, Y, LR)
    fails(capsys, lambda: v.prefetch_seen(out[0]["events"]))


# ------------------------------------------------------------- FSDP2's two knobs


def test_fsdp_settings_whose_options_never_reach_fully_shard_change_nothing(monkeypatch, capsys):
    """08's `fsdp_settings` with each setting's options made but not passed on: every setting
    runs FSDP2's defaults. Right (the sizes of `test_memory_parts.py`): all-gathers 8, 4, 8;
    a forward ends holding 12,456 B, 591,056 B (578,600 more: the whole model's fp32
    bytes), 6,548 B; computes in float32, float32, bfloat16. Slipped: 8 all-gathers,
    12,456 B and float32 in every setting."""
    widths = profiles.get("cpu").memory.widths
    numel = _numel(widths)
    right = fsdp_options.fsdp_settings(widths, N, X, Y, LR)
    holds(capsys, lambda: v.reshard_after_forward_keeps_layers(right, numel))
    holds(capsys, lambda: v.mixed_precision_policy_in_bf16(right))
    monkeypatch.setattr(fsdp_options, "_options", lambda setting: {})
    # the default takes no options: the slip leaves its run as it was, so only the others
    # run again (each setting is a launch of its own)
    monkeypatch.setattr(fsdp_options, "SETTINGS", fsdp_options.SETTINGS[1:])
    slipped = {**right, **fsdp_options.fsdp_settings(widths, N, X, Y, LR)}
    fails(capsys, lambda: v.reshard_after_forward_keeps_layers(slipped, numel))
    fails(capsys, lambda: v.mixed_precision_policy_in_bf16(slipped))


# ------------------------------------------------------------- bf16 against fp32


def test_a_16_bit_run_with_half_precision_weights_loses_its_accuracy(monkeypatch, capsys):
    """08's race at the notebook's widths for one epoch, its 16-bit run slipped to
    `model.half()` weights: Adam's state is fp16 too, where its eps of 1e-8 is 0 and its
    second moment, 0.001 g², flushes to zero for most gradients, so the first step divides
    by zero and turns the weights inf or NaN. Right:
    test accuracy 0.404 in fp32, 0.402 in bf16; slipped: 0.106 (chance). (Weights cast to
    bf16 instead, with no fp32 master copy, came within 1.2 points of fp32 at every size
    tried, the notebook's included: the verdict does not catch that.)"""
    mnist = load("mnist1d")
    m = profiles.get("cpu").memory
    widths = (mnist.input_shape[0], m.precision_hidden, m.precision_hidden, mnist.num_classes)
    race = precision.autocast_race(widths, mnist, 1, 64)
    holds(capsys, lambda: v.bf16_keeps_accuracy(race))
    train = precision._train

    def half_weights(model, optimizer, x, y, dtype, *args):
        if dtype != torch.float32:
            model.half()
        train(model, optimizer, x, y, dtype, *args)

    monkeypatch.setattr(precision, "_train", half_weights)
    race = precision.autocast_race(widths, mnist, 1, 64)
    fails(capsys, lambda: v.bf16_keeps_accuracy(race))
