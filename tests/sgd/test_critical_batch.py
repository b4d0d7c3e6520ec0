"""Steps to a target loss against the batch, the fitted bend, and the noise scale: the
verdicts print ✗ where the effect is absent, and a tiny sweep runs the real trial."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from course_utils.core import profiles
from course_utils.sgd import critical_batch, gradient_noise, sweep

BATCHES = [8, 32, 128, 512, 2048]


def found(steps):
    s_min, b_crit = critical_batch.fit_steps(BATCHES, steps)
    return critical_batch.StepsToTarget(BATCHES, steps, [0.1] * len(steps), s_min, b_crit)


def test_the_fit_recovers_s_min_and_b_crit():
    steps = [50 * (1 + 500 / b) for b in BATCHES]
    s_min, b_crit = critical_batch.fit_steps(BATCHES, steps)
    assert s_min == pytest.approx(50) and b_crit == pytest.approx(500)
    assert math.isnan(critical_batch.fit_steps([8, 32], [100, math.inf])[0])


def test_regimes_pass_on_mccandlish_curve_and_fail_without_a_bend():
    bent = found([50 * (1 + 500 / b) for b in BATCHES])
    assert critical_batch.scaling_regimes(bent).ok
    assert critical_batch.bend_near_noise_scale(bent, 600, 3).ok
    perfect = found([20000 / b for b in BATCHES])  # never levels off
    assert not critical_batch.scaling_regimes(perfect).ok
    assert not critical_batch.bend_near_noise_scale(perfect, 600, 3).ok  # B_crit is infinite
    flat = found([100.0] * len(BATCHES))  # never scaled at all: B_crit is 0
    assert not critical_batch.bend_near_noise_scale(flat, 600, 3).ok


def test_no_perfect_scaling_at_the_small_end_prints_a_cross(capsys):
    critical_batch.scaling_regimes(found([100.0] * len(BATCHES)))
    assert capsys.readouterr().out.startswith("✗ at the smallest batches")


def test_bend_far_from_the_noise_scale_fails():
    bent = found([50 * (1 + 500 / b) for b in BATCHES])
    assert not critical_batch.bend_near_noise_scale(bent, 50, 3).ok
    assert not critical_batch.bend_near_noise_scale(bent, 5000, 3).ok


def test_noise_scale_is_trace_over_squared_gradient():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    x, y = torch.randn(64, 4), torch.randint(0, 3, (64,))
    data = torch.utils.data.TensorDataset(x, y)
    measured = gradient_noise.measure(model, data, (1, 8), draws=4)
    assert gradient_noise.noise_scale(model, data) == pytest.approx(measured.noise_scale)
    same = torch.utils.data.TensorDataset(x[:1].repeat(64, 1), y[:1].repeat(64))
    assert gradient_noise.noise_scale(model, same) == pytest.approx(0, abs=1e-4)  # no noise


def test_a_tiny_sweep_finds_steps_per_batch():
    sizes = dataclasses.replace(
        profiles.get("cpu").sgd,
        hidden=16,
        critical_batch_sizes=(64, 256),
        critical_lr_factors=(1.0,),
        critical_target=2.2,
        critical_max_steps=200,
    )
    result = sweep.run(critical_batch.config(sizes), jobs=2, trial=critical_batch.trial_for(sizes))
    got = critical_batch.best_steps(result)
    assert got.batch_sizes == [64, 256] and all(math.isfinite(s) for s in got.steps)
    assert got.lrs == [sizes.critical_base_lr, sizes.critical_base_lr * 4]  # scaled from 64
