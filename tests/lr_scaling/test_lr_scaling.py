"""The lr-scaling experiment: the warmup schedule, curve distances, the summary, and the
trials run side by side in a sweep against the same trials run in this process."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from course_utils.core import profiles
from course_utils.lr_scaling import charts as plots
from course_utils.lr_scaling import experiments as lr_scaling
from course_utils.sgd import sweep
from course_utils.sgd.sweep import SweepResult, Trial

TINY = dataclasses.replace(
    profiles.get("cpu").scaling,
    hidden=16,
    base_batch=64,
    batch_sizes=(64, 256),
    epochs=2,
    warmup_epochs=1.0,
    seeds=(0,),
)


def test_linear_warmup_rises_linearly_then_holds():
    schedule = lr_scaling.LinearWarmup(4, start=0.25)
    assert [schedule(t) for t in range(6)] == [0.25, 0.4375, 0.625, 0.8125, 1.0, 1.0]
    assert lr_scaling.LinearWarmup(0)(0) == 1.0
    with pytest.raises(ValueError, match="starting factor"):
        lr_scaling.LinearWarmup(3, start=2.0)


def test_scaled_lr_is_linear_and_refuses_empty_batches():
    assert lr_scaling.scaled_lr(0.01, 8, 32) == pytest.approx(0.04)
    with pytest.raises(ValueError, match="batch sizes at least 1"):
        lr_scaling.scaled_lr(0.1, 0, 8)


def test_warmup_drives_the_optimizer_lr_through_lambda_lr():
    """Used as training.train's lr_schedule, the factor multiplies the scaled lr per update."""
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=lr_scaling.scaled_lr(0.01, 8, 64))
    schedule = lr_scaling.warmup_for(64, 8, warmup_epochs=1, samples=64 * 4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    seen = []
    for _ in range(6):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        scheduler.step()
    assert seen[0] == pytest.approx(0.01)  # Goyal: start at the base lr
    assert seen[4] == pytest.approx(0.08) and seen[5] == pytest.approx(0.08)
    assert all(b > a for a, b in zip(seen[:4], seen[1:5], strict=True))


def test_curve_distance_counts_a_blow_up_as_the_cap():
    assert lr_scaling.curve_distance([1.0, 2.0], [2.0, 1.0]) == 1.0
    assert lr_scaling.curve_distance([2.0, float("nan")], [2.0, 1.0]) == pytest.approx(4.5)
    assert lr_scaling.curve_distance([2.0, 1e6], [2.0, 1.0]) == pytest.approx(4.5)
    with pytest.raises(ValueError, match="cannot be compared"):
        lr_scaling.curve_distance([1.0], [1.0, 2.0])


def _fake_result(acc: dict, seeds=(0, 1)) -> SweepResult:
    """A finished sweep whose test accuracies are given per (rule, batch)."""
    trials = []
    for (rule, batch), value in acc.items():
        for seed in seeds:
            loss = 0.5 if value > 0.4 else 2.3
            metrics = {"test_acc": value, "train_loss": loss, "curve": [2.0, loss]}
            trials.append(
                Trial(len(trials), {"batch_size": batch, "rule": rule, "seed": seed}, metrics)
            )
    return SweepResult(lr_scaling.sweep_config(TINY), 2, 1.0, trials)


def test_summary_finds_the_limit_of_the_rule():
    base = 0.7
    table = {
        8: (base, base, base),
        32: (0.6, 0.7, 0.69),
        128: (0.4, 0.1, 0.6),
        512: (0.2, 0.1, 0.1),
    }
    acc = {(r, b): v[i] for b, v in table.items() for i, r in enumerate(lr_scaling.RULES)}
    summary = lr_scaling.summarize(_fake_result(acc), base_batch=8, most=0.5, tolerance=0.03)
    assert summary.kept == [True, True, True, False]
    assert summary.limit == 128
    assert summary.failed("scaled", 1.5) == [False, False, True, True]
    assert summary.failed("warmup", 1.5) == [False, False, False, True]
    assert summary.distance["unscaled"][0] == 0.0
    assert "lr scaled + warmup" in summary.table()


def test_summary_without_a_working_batch_has_no_limit():
    acc = {(r, b): 0.7 if b == 8 else 0.1 for b in (8, 64) for r in lr_scaling.RULES}
    assert lr_scaling.summarize(_fake_result(acc), base_batch=8).limit is None
    with pytest.raises(ValueError, match="base batch"):
        lr_scaling.summarize(_fake_result(acc), base_batch=16)


def test_a_failed_trial_is_reported_not_averaged():
    acc = {(r, b): 0.7 for b in (8, 64) for r in lr_scaling.RULES}
    result = _fake_result(acc)
    result.trials[0].metrics, result.trials[0].error = None, "ValueError: boom"
    with pytest.raises(RuntimeError, match="boom"):
        lr_scaling.summarize(result, base_batch=8)


def test_trial_refuses_unknown_rules_and_small_batches():
    with pytest.raises(ValueError, match="rule must be one of"):
        lr_scaling.scaling_trial(64, "sqrt", sizes=TINY)
    with pytest.raises(ValueError, match="below the base batch"):
        lr_scaling.scaling_trial(32, "scaled", sizes=TINY)


def test_sweep_trials_equal_their_serial_twins():
    """Each trial run side by side in a forked process ends exactly as it does here."""
    result = sweep.run(lr_scaling.sweep_config(TINY), jobs=2, trial=lr_scaling.trial_for(TINY))
    assert not result.failed and len(result.trials) == 6
    for t in result.trials:
        twin = lr_scaling.scaling_trial(**t.params, sizes=TINY)
        assert t.metrics["curve"] == twin["curve"]
        assert t.metrics["test_acc"] == twin["test_acc"]
    by = {(t.params["rule"], t.params["batch_size"]): t.metrics for t in result.trials}
    assert by["scaled", 256]["lr"] == pytest.approx(4 * TINY.base_lr)
    assert by["unscaled", 256]["lr"] == TINY.base_lr
    assert by["warmup", 256]["curve"] != by["scaled", 256]["curve"]
    assert by["warmup", 64]["curve"] == by["unscaled", 64]["curve"]  # no warmup at the base
    summary = lr_scaling.summarize(result, TINY.base_batch)
    assert math.isfinite(summary.base_accuracy)
    figs = [
        plots.curves_by_rule({r: summary.curves[r] for r in lr_scaling.RULES}, {}),
        plots.warmup_rescue(
            {256: summary.curves["scaled"][256]},
            {256: summary.curves["warmup"][256]},
            summary.curves["unscaled"][64],
        ),
        plots.accuracy_vs_batch(
            summary.batch_sizes, summary.accuracy, lr_scaling.RULE_LABELS, limit=64
        ),
    ]
    assert all(f.axes for f in figs)
