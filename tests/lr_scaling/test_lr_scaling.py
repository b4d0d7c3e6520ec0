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
from course_utils.lr_scaling import limits
from course_utils.sgd import sweep

TINY = dataclasses.replace(
    profiles.get("cpu").scaling,
    hidden=16,
    base_batch=64,
    batch_sizes=(64, 256),
    epochs=2,
    warmup_updates=2,
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
    """Used as training.Recipe's lr_schedule, the factor multiplies the scaled lr per update."""
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=lr_scaling.scaled_lr(0.01, 8, 64))
    schedule = lr_scaling.warmup_for(0.08, 0.01, updates=4)
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


def test_trial_refuses_unknown_rules_and_small_batches():
    with pytest.raises(ValueError, match="rule must be one of"):
        lr_scaling.scaling_trial(64, "cubic", sizes=TINY)
    with pytest.raises(ValueError, match="lr_cap"):
        lr_scaling.scaling_trial(256, "capped", sizes=TINY)
    with pytest.raises(ValueError, match="below the base batch"):
        lr_scaling.scaling_trial(32, "scaled", sizes=TINY)


def test_the_rules_give_their_learning_rates():
    assert lr_scaling.rule_lr("unscaled", TINY, 256) == TINY.base_lr
    assert lr_scaling.rule_lr("scaled", TINY, 256) == pytest.approx(4 * TINY.base_lr)
    assert lr_scaling.rule_lr("sqrt", TINY, 256) == pytest.approx(2 * TINY.base_lr)
    assert lr_scaling.rule_lr("capped", TINY, 256, lr_cap=TINY.base_lr) == TINY.base_lr


def test_sweep_trials_equal_their_serial_twins():
    """Each trial run side by side in a forked process ends exactly as it does here."""
    trial = lr_scaling.trial_for(TINY)
    base = sweep.run(lr_scaling.base_config(TINY), jobs=2, trial=trial)
    result = sweep.run(lr_scaling.sweep_config(TINY), jobs=2, trial=trial)
    assert not result.failed and len(result.trials) == 4
    for t in base.trials + result.trials:
        twin = lr_scaling.scaling_trial(**t.params, sizes=TINY)
        assert t.metrics["curve"] == twin["curve"]
        assert t.metrics["test_acc"] == twin["test_acc"]
    assert base.trials[0].metrics["noise_scale"] > 0
    by = {(t.params["rule"], t.params["batch_size"]): t.metrics for t in result.trials}
    assert by["scaled", 256]["lr"] == pytest.approx(4 * TINY.base_lr)
    assert by["unscaled", 256]["lr"] == TINY.base_lr
    assert by["warmup", 256]["curve"] != by["scaled", 256]["curve"]
    summary = limits.summarize(base, result, TINY.base_batch, TINY.tolerance)
    assert math.isfinite(summary.base_accuracy)
    controls = sweep.run(lr_scaling.controls_config(TINY, [256], 0.02, 12), jobs=2, trial=trial)
    found = limits.controls(controls)
    assert found.budget_steps == [summary.steps["warmup"][1]] and found.updates == 12
    figs = [
        plots.curves_by_rule(
            {r: summary.curves[r] for r in lr_scaling.RULES},
            limits.curve_titles(summary, TINY.stall_loss),
        ),
        plots.warmup_rescue(
            {256: summary.curves["scaled"][256]},
            {256: summary.curves["warmup"][256]},
            summary.curves["unscaled"][64],
            limits.rescue_title([256], [256]),
        ),
        plots.accuracy_vs_batch(
            summary.batch_sizes, summary.accuracy, lr_scaling.RULE_LABELS, 64,
            limits.limit_title(summary),
        ),
    ]  # fmt: skip
    assert all(f.axes for f in figs)
    assert figs[2].axes[0].get_ylim()[0] == 0
