"""Notebook 03's verdicts on the scaled curves and the fixed lr's loss, run through the
notebook's own path (its trial, its two sweeps, `limits.summarize`) in a world where the
effect is absent: a rule whose lr is never scaled, and a sweep that stops at twice the base
batch. Each prints ✗."""

from __future__ import annotations

import dataclasses

from course_utils.core import profiles
from course_utils.lr_scaling import experiments, limits, verdicts
from course_utils.sgd import sweep

SIZES = dataclasses.replace(
    profiles.get("cpu").scaling, seeds=(0,), epochs=5, noise_scale=False, sweep_jobs=2
)


def _summary(sizes) -> limits.ScalingSummary:
    """What notebook 03's sweep cell computes, for these sizes."""
    trial = experiments.trial_for(sizes)
    base = sweep.run(experiments.base_config(sizes), jobs=sizes.sweep_jobs, trial=trial)
    result = sweep.run(experiments.sweep_config(sizes), jobs=sizes.sweep_jobs, trial=trial)
    return limits.summarize(base, result, sizes.base_batch, sizes.tolerance)


def test_a_rule_whose_lr_is_never_scaled_does_not_coincide_with_the_base(monkeypatch, capsys):
    monkeypatch.setattr(experiments, "scaled_lr", lambda base_lr, base_batch, batch: base_lr)
    summary = _summary(dataclasses.replace(SIZES, batch_sizes=(8, 32, 128)))
    trained, ratios = limits.scaled_closeness(summary, SIZES.stall_loss)
    assert trained and all(r < limits.CLOSER for r in ratios)  # the same runs as the fixed lr's
    assert not verdicts.scaled_curves_coincide(summary, SIZES.stall_loss)
    assert "✗ wherever the scaled lr trains, its curve is over 3x closer" in capsys.readouterr().out


def test_a_sweep_that_stops_at_twice_the_base_batch_loses_little_at_a_fixed_lr(capsys):
    summary = _summary(dataclasses.replace(SIZES, batch_sizes=(8, 16)))
    assert not verdicts.fixed_lr_loses_at_the_largest(summary)
    out = capsys.readouterr().out
    assert "✗ at a fixed lr the largest batch loses over 20 points of accuracy" in out
