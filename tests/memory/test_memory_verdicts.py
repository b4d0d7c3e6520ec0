"""Each verdict of notebook 08 passes on the effect and fails where it is absent."""

from __future__ import annotations

import torch

from course_utils.memory import verdicts as v


def _zero_row(stage, world, measured=None, sent=None, params=None, numel=100):
    from course_utils.memory.formulas import comm_multiple, model_state_bytes

    return {
        "stage": stage,
        "world_size": world,
        "numel": numel,
        "measured": model_state_bytes(numel, world, stage) if measured is None else measured,
        "bytes_sent": 4 * numel * comm_multiple(stage, world) if sent is None else sent,
        "params": torch.zeros(3) if params is None else params,
    }


def test_accounting_counts_the_rows_off_their_formula():
    from course_utils.memory.formulas import accounting, layout_pairs

    mixed = {"numel": 10, "params": 20, "grads": 20, "optimizer": 120}
    autocast = {"numel": 10, "params": 40, "grads": 40, "optimizer": 80}
    line = accounting(layout_pairs([mixed, mixed], "mixed"), 0.01, "2 + 2 + 12")
    assert line == "accounting: 6 of 6 rows within 1% of 2 + 2 + 12"
    assert accounting(layout_pairs([autocast], "mixed"), 0.01, "x").startswith("accounting: 0 of 3")


def _peak_rows(gather: int = 250, zero2_extra: int = 60):
    """Rows where DDP's step adds 100 bytes, ZeRO-2's `zero2_extra` more than ZeRO-1's,
    ZeRO-3's `gather` more than DDP's; the largest layer is 50 parameters (200 bytes)."""
    rows = []
    for world in (2, 4):
        for stage in range(4):
            row = _zero_row(stage, world)
            extra = {0: 100, 1: 100, 2: 100 + zero2_extra, 3: 100 + gather}[stage]
            row.update(peak=row["measured"] + extra, predicted_peak=row["measured"] + extra,
                       largest_layer=50)  # fmt: skip
            rows.append(row)
    return rows


def test_peak_verdicts_fail_where_the_effect_is_absent():
    rows = _peak_rows()
    assert v.zero2_peak_below_zero1(rows) and v.zero3_peak_holds_a_gathered_layer(rows)
    # ZeRO-2 keeping every full gradient until the step's end: its saving is gone at the peak
    assert not v.zero2_peak_below_zero1(_peak_rows(zero2_extra=500))
    # ZeRO-3 computing without gathering a whole layer
    assert not v.zero3_peak_holds_a_gathered_layer(_peak_rows(gather=20))


def test_stage_matches_ddp():
    rows = [_zero_row(0, 2), _zero_row(1, 2)]
    assert v.stage_matches_ddp(rows, 1)
    rows[1]["params"] = torch.full((3,), 1e-3)
    assert not v.stage_matches_ddp(rows, 1)
    assert not v.stage_matches_ddp(rows[:1], 1)  # no rows of the stage at all
    assert not v.stage_matches_ddp([*rows, _zero_row(0, 4)], (1, 2))  # no ZeRO-2 rows


def test_bytes_fall_with_ranks():
    rows = [_zero_row(2, n) for n in (1, 2, 4)]
    assert v.bytes_fall_with_ranks(rows, 2)
    unsharded = [_zero_row(2, n, measured=1600) for n in (1, 2, 4)]  # nothing was sharded
    assert not v.bytes_fall_with_ranks(unsharded, 2)
    both = [*rows, *[_zero_row(3, n) for n in (1, 2, 4)]]
    assert v.bytes_fall_with_ranks(both, (2, 3))
    assert not v.bytes_fall_with_ranks([*rows, *unsharded[:0], _zero_row(3, 2)], (2, 3))


def test_traffic_follows_formula():
    assert v.traffic_follows_formula([_zero_row(3, 2), _zero_row(3, 4)], 3)
    like_ddp = [_zero_row(3, n, sent=4 * 100 * 2 * (n - 1) / n) for n in (2, 4)]
    assert not v.traffic_follows_formula(like_ddp, 3)
    every = [_zero_row(s, n) for s in range(4) for n in (2, 4)]
    line = repr(v.traffic_follows_formula(every, (0, 1, 2, 3)))
    assert line == (
        "✓ each rank of DDP, ZeRO-1 and ZeRO-2 sends 2(N-1)/N of the model's bytes per step, "
        "each of ZeRO-3 3(N-1)/N, within 5%"
    )
    assert not v.traffic_follows_formula([*every[:6], *like_ddp], (0, 1, 2, 3))


def test_fsdp_verdicts():
    assert v.fsdp_stores_a_shard([200, 200], 100)
    assert not v.fsdp_stores_a_shard([400, 400], 100)  # every rank holds everything
    gaps = {"FSDP2": 3e-6, "ZeRO-3": 2e-6}
    assert v.every_run_matches_fp64(gaps, fp32_gap=2e-6)
    assert not v.every_run_matches_fp64({**gaps, "ZeRO-3": 1e-3}, fp32_gap=2e-6)  # a bad shard
    assert v.every_run_matches_fp64({"FSDP2": 9e-7}, fp32_gap=1e-9)  # 1e-6 at the least
    assert not v.every_run_matches_fp64({}, fp32_gap=1e-6)
    events = [("all-gather", 0, 0, 1), ("prefetch", 0, 0, 1)]
    assert v.prefetch_seen(events)
    assert not v.prefetch_seen(events[:1])


def test_precision_verdicts():
    assert v.loss_scaling_rescues({"fp16_lost": 0.9, "scaled_lost": 0.001})
    assert not v.loss_scaling_rescues({"fp16_lost": 0.9, "scaled_lost": 0.3})  # scaler ignored
    assert not v.loss_scaling_rescues({"fp16_lost": 0.0, "scaled_lost": 0.0})  # nothing to lose
    sums = {
        "exact_sum": 1.0,
        "fp16_sum": 0.25,
        "fp16_weight": 1.0,
        "fp32_weight": 2.0,
        "exact_weight": 2.0,
    }
    assert v.fp16_sum_stalls(sums)
    assert not v.fp16_sum_stalls({**sums, "fp16_sum": 0.99})  # the sum kept growing
    assert not v.fp16_sum_stalls({**sums, "fp16_weight": 1.99})  # the fp16 weight moved
    assert not v.fp16_sum_stalls({**sums, "fp32_weight": 1.0})  # the master weight stalled too
    race = {"fp32": {"accuracy": 0.6}, "bf16": {"accuracy": 0.59}}
    assert v.bf16_keeps_accuracy(race)
    assert not v.bf16_keeps_accuracy({**race, "bf16": {"accuracy": 0.3}})


def test_precision_verdicts_fail_through_the_notebooks_calls_without_their_effect(capsys):
    """08's two calls at the profile's sizes, each in a world without its effect: a
    GradScaler whose scale is 1 (the scale left at its floor) rescues no gradient, and
    additions of a weight's own fp16 spacing (2^-10 at 1.0) move the fp16 weight."""
    from course_utils.core import profiles
    from course_utils.memory import precision, runs

    M = profiles.get("cpu").memory
    x, y = runs.batches(1, 64)
    unscaled = precision.underflow(M.widths, x[0], y[0], M.loss_shrink, scale=1.0)
    assert not v.loss_scaling_rescues(unscaled)
    assert not v.fp16_sum_stalls(precision.small_sums(M.small_terms, 2.0**-10))
    out = capsys.readouterr().out
    assert "✗ without a loss scale fp16 flushes" in out and "✗ small additions vanish" in out


def _ckpt(checkpointed, saved, step, forward=1.0, grad=0.0, peak=None):
    return {
        "checkpointed": checkpointed,
        "saved": saved,
        "peak": saved + 5 if peak is None else peak,
        "step_seconds": step,
        "forward_seconds": forward,
        "grad": torch.full((2,), grad),
    }


def test_checkpointing_verdicts():
    rows = [_ckpt(0, 100, 3.0), _ckpt(4, 60, 3.5), _ckpt(8, 20, 3.9, peak=40)]
    assert v.checkpointing_saves_bytes(rows) and v.checkpointing_costs_a_forward(rows)
    flat = [_ckpt(0, 100, 3.0), _ckpt(4, 100, 3.5), _ckpt(8, 100, 3.9, peak=120)]
    assert not v.checkpointing_saves_bytes(flat)  # checkpoint() that saves everything
    little = [_ckpt(0, 100, 3.0), _ckpt(4, 80, 3.5), _ckpt(8, 60, 3.9, peak=80)]
    assert not v.checkpointing_saves_bytes(little)  # saving under half
    # one block's activations: 100 / 8; a step that recomputed nothing would not hold them
    assert not v.checkpointing_saves_bytes([*rows[:2], _ckpt(8, 20, 3.9, peak=25)])
    wrong = [_ckpt(0, 100, 3.0), _ckpt(8, 20, 3.9, grad=1.0)]
    assert not v.checkpointing_costs_a_forward(wrong)  # a recompute that changes the result
    assert not v.checkpointing_costs_a_forward([_ckpt(0, 100, 3.0), _ckpt(8, 20, 2.9)])
    assert not v.checkpointing_costs_a_forward([_ckpt(0, 100, 3.0), _ckpt(8, 20, 9.0)])


def _settings(gathers_kept=4, held_kept=500, bf16="bfloat16", stored_mixed=100):
    return {
        "default": {"all_gathers": 8, "kept_after_forward": 100, "computes_in": "float32",
                    "stored": 100},
        "reshard_after_forward=False": {"all_gathers": gathers_kept,
                                        "kept_after_forward": held_kept},
        "bf16 MixedPrecisionPolicy": {"computes_in": bf16, "stored": stored_mixed},
    }  # fmt: skip


def test_fsdp_settings_verdicts_fail_where_the_effect_is_absent():
    numel = 100  # 400 bytes in fp32
    assert v.reshard_after_forward_keeps_layers(_settings(), numel)
    assert not v.reshard_after_forward_keeps_layers(_settings(gathers_kept=8), numel)
    assert not v.reshard_after_forward_keeps_layers(_settings(held_kept=150), numel)
    assert v.mixed_precision_policy_in_bf16(_settings())
    assert not v.mixed_precision_policy_in_bf16(_settings(bf16="float32"))  # policy ignored
    assert not v.mixed_precision_policy_in_bf16(_settings(stored_mixed=50))  # bf16 shards


def test_a_checkpoint_that_is_a_plain_call_fails_the_bytes_verdict(monkeypatch):
    """08's measurement with checkpoint() a plain call of the block: every block keeps its
    activations for backward, so checkpointing more blocks saves no bytes."""
    from course_utils.memory import checkpointing

    monkeypatch.setattr(checkpointing, "checkpoint", lambda block, x, use_reentrant: block(x))
    rows = checkpointing._checkpointed_on_rank(4, 16, 8, (0, 2, 1), 1)
    assert not v.checkpointing_saves_bytes(rows)


def test_recomputing_blocks_thrice_fails_the_time_verdict(monkeypatch):
    """The notebook's own measurement, with a checkpoint() that wastes two more forward
    passes of the block in forward and in backward: about 5 extra forwards, not 1."""
    from torch.utils.checkpoint import checkpoint

    from course_utils.memory import checkpointing

    def thrice(block, x):
        block(x), block(x)
        return block(x)

    def wasteful(block, x, use_reentrant):
        return checkpoint(thrice, block, x, use_reentrant=use_reentrant)

    monkeypatch.setattr(checkpointing, "checkpoint", wasteful)
    rows = checkpointing._checkpointed_on_rank(8, 128, 256, (0, 1), 3)
    assert not v.checkpointing_costs_a_forward(rows)
