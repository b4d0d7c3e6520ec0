"""Notebook 03's verdicts on the scaled curves, the fixed lr's loss and the limit of
scaling, run through the notebook's own path (its trial, its two sweeps,
`limits.summarize`) in a world where the effect is absent: a rule whose lr is never scaled,
and a sweep that stops at twice the base batch. Each prints ✗."""

from __future__ import annotations

import dataclasses

import pytest

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


@pytest.fixture(scope="module")
def never_scaled() -> limits.ScalingSummary:
    """A rule whose lr is never scaled, at batches 8, 32 and 128."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(experiments, "scaled_lr", lambda base_lr, base_batch, batch: base_lr)
        return _summary(dataclasses.replace(SIZES, batch_sizes=(8, 32, 128)))


@pytest.fixture(scope="module")
def stops_at_twice() -> limits.ScalingSummary:
    """A sweep that stops at twice the base batch."""
    return _summary(dataclasses.replace(SIZES, batch_sizes=(8, 16)))


def test_a_rule_whose_lr_is_never_scaled_does_not_coincide_with_the_base(never_scaled, capsys):
    summary = never_scaled
    trained, ratios = limits.scaled_closeness(summary, SIZES.stall_loss)
    assert trained and all(r < limits.CLOSER for r in ratios)  # the same runs as the fixed lr's
    assert not verdicts.scaled_curves_coincide(summary, SIZES.stall_loss)
    assert "✗ wherever the scaled lr trains, its curve is over 3x closer" in capsys.readouterr().out


def test_a_sweep_that_stops_at_twice_the_base_batch_loses_little_at_a_fixed_lr(
    stops_at_twice, capsys
):
    assert not verdicts.fixed_lr_loses_at_the_largest(stops_at_twice)
    out = capsys.readouterr().out
    assert "✗ at a fixed lr the largest batch loses over 20 points of accuracy" in out


def test_the_limit_verdicts_fail_for_a_rule_never_scaled_or_a_sweep_that_stops_early(
    never_scaled, stops_at_twice, capsys
):
    """03's verdicts on where scaling holds and where it breaks, in the same two worlds: a
    rule that never scales keeps no batch (no limit, so nothing within it or beyond it); a
    sweep that stops at twice the base batch cannot reach 16x, finds no stall, and its two
    rules' lrs (2x and 1.41x the base) end alike. (Whether that sweep keeps batch 16 is
    within 0.0025 of the tolerance here, so nothing below depends on it.)"""
    at_least, stall = SIZES.at_least, SIZES.stall_loss
    assert not verdicts.kept_up_to(never_scaled, at_least)
    assert not verdicts.linear_ahead_within_limit(never_scaled)
    assert not verdicts.breaks_beyond(never_scaled)
    assert not verdicts.kept_up_to(stops_at_twice, at_least)
    assert not verdicts.sqrt_ahead_at_the_largest(stops_at_twice)
    assert not verdicts.scaled_stalls_at_the_largest(stops_at_twice, stall)
    assert not verdicts.warmup_rescues_none(stops_at_twice, stall)
    assert capsys.readouterr().out.count("✗") == 7
