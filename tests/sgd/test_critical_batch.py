"""Steps to a target loss against the batch, the fitted bend, and the noise scale: the
verdicts print ✗ where the effect is absent, and a tiny sweep runs the real trial."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from course_utils.core import profiles
from course_utils.sgd import charts, critical_batch, gradient_noise, sweep

BATCHES = [8, 32, 128, 512, 2048]


def found(steps, by_seed=(500.0, 520.0)):
    s_min, b_crit = critical_batch.fit_steps(BATCHES, steps)
    lrs = [[0.1] for _ in steps]
    return critical_batch.StepsToTarget(BATCHES, steps, lrs, s_min, b_crit, list(by_seed))


def test_the_fit_recovers_s_min_and_b_crit():
    steps = [50 * (1 + 500 / b) for b in BATCHES]
    s_min, b_crit = critical_batch.fit_steps(BATCHES, steps)
    assert s_min == pytest.approx(50) and b_crit == pytest.approx(500)
    assert math.isnan(critical_batch.fit_steps([8, 32], [100, math.inf])[0])


def test_no_one_batch_size_decides_the_fit():
    """A 20% error at batch 8 (thousands of steps) moves B_crit by ~11%; unweighted least
    squares of the steps moved it to over 11000."""
    steps = [50 * (1 + 500 / b) for b in BATCHES]
    steps[0] *= 1.2
    assert critical_batch.fit_steps(BATCHES, steps)[1] == pytest.approx(500, rel=0.15)


def test_the_cap_moves_every_lr_down_together_and_none_repeats():
    sizes = profiles.get("cpu").sgd
    assert critical_batch.trial_lrs(sizes, 8) == pytest.approx([0.005, 0.01, 0.02])
    top = critical_batch.trial_lrs(sizes, 2048)  # asked 1.28, 2.56, 5.12: above the cap
    assert len(top) == len(sizes.critical_lr_factors) and max(top) == sizes.critical_lr_cap
    assert critical_batch.capped_batches(sizes) == [2048]
    pairs = critical_batch.config(sizes)["parameters"]["batch_and_lr"]["values"]
    assert len({tuple(p) for p in pairs}) == len(pairs) == 3 * len(sizes.critical_batch_sizes)


def test_regimes_pass_on_mccandlish_curve_and_fail_without_a_bend():
    bent = found([50 * (1 + 500 / b) for b in BATCHES])
    assert critical_batch.nearly_perfect_at_the_small_end(bent).ok
    assert critical_batch.diminishing_at_the_large_end(bent).ok
    assert critical_batch.bend_near_noise_scale(bent, 600, 1.5).ok
    perfect = found([20000 / b for b in BATCHES])  # never levels off
    assert critical_batch.nearly_perfect_at_the_small_end(perfect).ok
    assert not critical_batch.diminishing_at_the_large_end(perfect).ok
    assert not critical_batch.bend_near_noise_scale(perfect, 600, 1.5).ok  # B_crit is infinite
    flat = found([100.0] * len(BATCHES))  # never scaled at all: B_crit is 0
    assert not critical_batch.bend_near_noise_scale(flat, 600, 1.5).ok


def test_no_perfect_scaling_at_the_small_end_prints_a_cross(capsys):
    assert not critical_batch.nearly_perfect_at_the_small_end(found([100.0] * len(BATCHES)))
    assert capsys.readouterr().out.startswith("✗ at the smallest batches")


def test_a_bend_far_out_is_not_diminishing_returns(capsys):
    late = found([50 * (1 + 1500 / b) for b in BATCHES])  # saves 80% of the ideal at the end
    assert critical_batch.nearly_perfect_at_the_small_end(late).ok
    assert not critical_batch.diminishing_at_the_large_end(late).ok
    assert "✗ at the largest batches it saves under 65% of it" in capsys.readouterr().out


def test_bend_far_from_the_noise_scale_fails():
    bent = found([50 * (1 + 500 / b) for b in BATCHES])
    assert not critical_batch.bend_near_noise_scale(bent, 300, 1.5).ok
    assert not critical_batch.bend_near_noise_scale(bent, 800, 1.5).ok


def test_seeds_that_disagree_beyond_the_window_print_a_cross(capsys):
    steps = [50 * (1 + 500 / b) for b in BATCHES]
    assert critical_batch.seeds_agree(found(steps, (474.0, 659.0)), 1.5).ok
    assert not critical_batch.seeds_agree(found(steps, (300.0, 700.0)), 1.5).ok
    assert not critical_batch.seeds_agree(found(steps, (500.0, math.inf)), 1.5).ok
    assert capsys.readouterr().out.splitlines()[-1].startswith("✗ the seeds' fitted B_crit")


def test_the_chart_title_reads_the_fit():
    bent = found([50 * (1 + 500 / b) for b in BATCHES])
    assert charts.steps_title(bent) == (
        "fitted: steps fall as 1/B well below batch 500 and approach 50 far above it"
    )
    assert "no bend within" in charts.steps_title(found([20000 / b for b in BATCHES]))
    assert "barely fall" in charts.steps_title(found([100.0] * len(BATCHES)))
    assert charts.steps_to_target(bent, 600, 1.0).axes[0].get_title() == charts.steps_title(bent)


def test_noise_scale_is_trace_over_squared_gradient():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    x, y = torch.randn(64, 4), torch.randint(0, 3, (64,))
    data = torch.utils.data.TensorDataset(x, y)
    measured = gradient_noise.measure(model, data, (1, 8), draws=4)
    assert gradient_noise.noise_scale(model, data) == pytest.approx(measured.noise_scale)
    same = torch.utils.data.TensorDataset(x[:1].repeat(64, 1), y[:1].repeat(64))
    assert gradient_noise.noise_scale(model, same) == pytest.approx(0, abs=1e-4)  # no noise


def test_full_loss_is_the_mean_over_every_sample():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    x, y = torch.randn(50, 4), torch.randint(0, 3, (50,))
    data = torch.utils.data.TensorDataset(x, y)
    expected = float(torch.nn.functional.cross_entropy(model(x), y).detach())
    assert critical_batch.full_loss(model, data, chunk=16) == pytest.approx(expected)


def test_a_tiny_sweep_finds_steps_per_batch():
    sizes = dataclasses.replace(
        profiles.get("cpu").sgd,
        hidden=16,
        critical_batch_sizes=(64, 256),
        critical_lr_factors=(1.0,),
        critical_target=2.2,
        critical_max_samples=200 * 256,
        critical_seeds=(0,),
    )
    result = sweep.run(critical_batch.config(sizes), jobs=2, trial=critical_batch.trial_for(sizes))
    got = critical_batch.best_steps(result)
    assert got.batch_sizes == [64, 256] and all(math.isfinite(s) for s in got.steps)
    assert got.lrs == [[sizes.critical_base_lr], [sizes.critical_base_lr * 4]]  # scaled from 64
    assert len(got.b_crit_by_seed) == 1


def test_the_bend_verdicts_fail_for_a_sweep_whose_trials_ignore_their_batch(capsys):
    """01's sweep and fit as the notebook runs them, with the slip of a trial that trains
    every configuration as the first (batch 64 at its lr): every batch takes the same
    updates, so doubling the batch saves none of the ideal halving, and the fitted curve has
    no bend (B_crit 0) to lie near B_simple."""
    sizes = dataclasses.replace(
        profiles.get("cpu").sgd,
        hidden=16,
        critical_batch_sizes=(64, 256, 1024),
        critical_lr_factors=(1.0,),
        critical_target=2.2,
        critical_max_samples=200 * 256,
        critical_seeds=(0,),
    )
    first = (64, sizes.critical_base_lr)
    result = sweep.run(
        critical_batch.config(sizes),
        jobs=2,
        trial=lambda batch_and_lr, seed=0: critical_batch.steps_trial(first, seed, sizes),
    )
    found = critical_batch.best_steps(result)
    assert len(set(found.steps)) == 1 and math.isfinite(found.steps[0])
    assert critical_batch.saving_share(found, 0) == 0
    assert not critical_batch.nearly_perfect_at_the_small_end(found)
    assert capsys.readouterr().out.startswith("✗ at the smallest batches a larger batch saves")
    assert found.b_crit == pytest.approx(0, abs=1e-6)  # no bend: larger batches never help
    assert not critical_batch.bend_near_noise_scale(found, 600, sizes.critical_factor)
    assert capsys.readouterr().out.startswith("✗ the bend of the fitted curve")


def test_notebook_01s_noise_scale_is_recomputed_at_its_weights():
    """Notebook 01 evaluates the loss along its mini-batch run; `at_minibatch_run` trains
    without evaluating. Evaluating moves no weight, so both measure at the same point."""
    from course_utils.core import data, models, training

    P = profiles.get("cpu")
    S = dataclasses.replace(P.sgd, compare_samples=256, minibatch_epochs=1, hidden=16)
    P = dataclasses.replace(P, sgd=S)
    ds = data.load(P.dataset)
    train_set, _ = data.train_val_split(ds.train, S.val_fraction, seed=0)
    compare = training.as_tensors(torch.utils.data.Subset(train_set, range(S.compare_samples)))
    net = models.build(P.model, ds.input_shape, ds.num_classes, S.hidden, seed=0)
    training.train(
        net,
        training.tensor_loader(compare, S.minibatch_size, seed=0),
        training.Recipe(epochs=S.minibatch_epochs, lr=S.compare_lr, seed=0, threads=S.threads),
        training.Evaluation(
            eval_loader=training.tensor_loader(compare, 4096, shuffle=False), eval_every=2
        ),
    )
    measured = gradient_noise.measure(net, compare, (1, 4), draws=2).noise_scale
    assert gradient_noise.at_minibatch_run(P) == pytest.approx(measured, rel=1e-6)
