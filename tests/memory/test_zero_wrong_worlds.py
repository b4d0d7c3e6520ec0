"""Notebook 08's ZeRO verdicts, run through the notebook's own `compare_stages` on real gloo
ranks with one slip in the stage they judge. Each prints ✗."""

from __future__ import annotations

import pytest

from course_utils.memory import runs, verdicts, zero
from course_utils.parallel import zero3
from course_utils.parallel.allreduce import ring_reduce_scatter
from course_utils.parallel.zero import DDP, Zero1, Zero2, own_chunk

ODD = (40, 7, 10)  # as tests/memory/test_zero.py: no N divides its 367 parameters
DEEP = (40, 32, 32, 10)  # gradients large enough to set a step's peak
STEPS, BATCH, LR = 4, 4, 1e-2


def _rows(worlds, stages):
    return runs.compare_stages(ODD, worlds, STEPS, BATCH, LR, stages=stages)


def test_zero1_that_never_all_gathers_its_updated_chunks_leaves_ddp(monkeypatch, capsys):
    """Each rank steps its own chunk and keeps the other ranks' chunks as they were."""
    monkeypatch.setattr(Zero1, "after_step", lambda self: None)
    rows = _rows((2,), (0, 1))
    assert not verdicts.stage_matches_ddp(rows, 1)
    assert capsys.readouterr().out.startswith("✗ the parameters of ZeRO-1 equal DDP's")


def test_zero1_whose_optimizer_steps_the_whole_model_keeps_its_bytes_at_every_n(monkeypatch):
    """The gradient is reduce-scattered, but Adam's state covers every parameter on every
    rank: the bytes per rank stay as DDP's, whatever N."""
    monkeypatch.setattr(Zero1, "_owned", DDP._owned)
    rows = _rows((1, 2), (0, 1))
    one, two = (runs.stage_row(rows, n, 1)["measured"] for n in (1, 2))
    assert two >= one  # 8 bytes more at N = 2: the padding of 367 parameters
    assert not verdicts.bytes_fall_with_ranks(rows, 1)


def test_zero2_that_keeps_the_whole_gradient_peaks_above_zero1(monkeypatch):
    """ZeRO-2's reduce-scatter without freeing the parameters' whole gradients. At ODD's 367
    parameters the allocator's overheads outweigh a gradient, and even the right ZeRO-2
    peaks above ZeRO-1 (5,988 against 5,684 B); at DEEP the right one peaks below (37,484
    against 39,240 B), the slipped one above (45,652 B)."""
    right = runs.compare_stages(DEEP, (2,), STEPS, BATCH, LR, stages=(1, 2))
    assert verdicts.zero2_peak_below_zero1(right)

    def scatter_and_keep(self, i):
        unit = self.units[i]
        grad = unit.flatten([p.grad for p in unit.parameters()])
        ring_reduce_scatter(grad)
        self.grads[i].copy_(own_chunk(grad).div_(self.world))

    monkeypatch.setattr(Zero2, "_scatter", scatter_and_keep)
    slipped = runs.compare_stages(DEEP, (2,), STEPS, BATCH, LR, stages=(1, 2))
    assert not verdicts.zero2_peak_below_zero1(slipped)


@pytest.fixture
def gathered_once(monkeypatch):
    """ZeRO-3 whose backward reuses the layer its forward gathered (until the optimizer
    changes the shard), instead of gathering it again."""
    gather, kept = zero3._gathered, {}

    def reused(shard, unit):
        key = (id(shard), shard._version)
        if key not in kept:  # the shard is kept too: a freed one's id could name another
            kept[key] = (shard, gather(shard, unit))
        return kept[key][1]

    monkeypatch.setattr(zero3, "_gathered", reused)


def test_zero3_that_keeps_the_forwards_gathered_layer_sends_two_not_three(gathered_once):
    rows = _rows((2,), (3,))
    row = runs.stage_row(rows, 2, 3)
    assert row["bytes_sent"] / (4 * row["numel"]) == pytest.approx(1.0, rel=0.05)  # 2(N-1)/N
    assert not verdicts.traffic_follows_formula(rows, 3)


def test_zero3_that_keeps_its_whole_weights_holds_no_gathered_layer(monkeypatch):
    """A "ZeRO-3" that never lets its whole layers go: what DDP holds, so its step gathers
    nothing on top."""
    keeps_whole = type("KeepsWhole", (DDP,), {"stage": 3})
    monkeypatch.setitem(zero._BY_STAGE, 3, keeps_whole)
    rows = _rows((2,), (0, 3))
    assert not verdicts.zero3_peak_holds_a_gathered_layer(rows)
