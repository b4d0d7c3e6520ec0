"""The sharp-minima experiment: fitting to a loss, the measures, the line, valley widths, and
the trials run side by side in a sweep against the same trials run in this process."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from course_utils.core import profiles
from course_utils.sgd import sweep
from course_utils.sharp_minima import arms, landscape, results, verdicts
from course_utils.sharp_minima import charts as plots
from course_utils.sharp_minima import experiments as sharp_minima

TINY = dataclasses.replace(
    profiles.get("cpu").sharp,
    hidden=16,
    train_samples=256,
    small_batch=16,
    large_batch=256,
    small_lr=0.05,
    large_lr=0.2,
    fit_loss=1.0,
    fit_accuracy=0.5,
    check_every_steps=10,
    max_steps=3000,
    seeds=(0,),
    slow_arm_seeds=(0,),
    ascent_steps=3,
    hessian_iters=5,
    measure_samples=128,
    line_points=9,
    line_range=(-0.5, 1.5),
)


@pytest.fixture(scope="module")
def prob():
    return sharp_minima.problem(TINY, "mnist1d")


def test_valley_width_of_parabolas_is_known():
    """Loss h * (a - end)^2 rises by r at distance sqrt(r / h) from the end."""
    alphas = [i / 100 for i in range(-100, 201)]
    wide = [0.5 * a**2 if a <= 0 else 0.0 for a in alphas]
    narrow = [8.0 * (a - 1) ** 2 if a >= 1 else 0.0 for a in alphas]
    assert sharp_minima.valley_width(alphas, wide, 0, 0.5) == pytest.approx(1.0, abs=1e-3)
    assert sharp_minima.valley_width(alphas, narrow, 1, 2.0) == pytest.approx(0.5, abs=1e-3)
    flat = [0.0] * len(alphas)
    assert sharp_minima.valley_width(alphas, flat, 0, 1.0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="alpha=1"):
        sharp_minima.valley_width([0.0, 0.5], [0.0, 0.1], 1, 1.0)


def test_line_alphas_hit_both_solutions_exactly():
    for sizes in (profiles.get("cpu").sharp, TINY):
        alphas = sharp_minima.line_alphas(sizes)
        assert 0.0 in alphas and 1.0 in alphas


def test_fit_stops_at_the_target_loss_and_measures(prob):
    model = sharp_minima.build_model(TINY, prob, seed=0)
    run = sharp_minima.fit(model, prob, TINY.small_batch, TINY.small_lr, TINY, seed=0)
    assert run["fitted"] and run["train_loss"] <= TINY.fit_loss
    assert run["steps"] > 0 and run["epochs"] >= 1
    assert sharp_minima.evaluate(model, prob.x, prob.y)[0] == pytest.approx(run["train_loss"])
    measures = sharp_minima.measure(model, prob, TINY)
    assert measures["sharpness"] > 0 and measures["hessian"] > 0
    assert 0 <= measures["test_acc"] <= 1


def test_fit_gives_up_after_max_steps(prob):
    sizes = dataclasses.replace(TINY, fit_loss=1e-6, max_steps=20)
    model = sharp_minima.build_model(sizes, prob, seed=0)
    run = sharp_minima.fit(model, prob, 16, 0.01, sizes)
    assert not run["fitted"] and 20 <= run["steps"] < 40


def test_along_line_ends_are_the_two_solutions(prob):
    a = sharp_minima.build_model(TINY, prob, seed=0)
    b = sharp_minima.build_model(TINY, prob, seed=1)
    line = sharp_minima.along_line(a, b, prob, [0.0, 0.5, 1.0], samples=64)
    x, y = prob.measure_set(64)
    for end, model in ((0, a), (-1, b)):
        loss, acc = sharp_minima.evaluate(model, x, y)
        assert line["train_loss"][end] == pytest.approx(loss, rel=1e-5)
        assert line["train_acc"][end] == pytest.approx(acc)
        assert line["test_acc"][end] == pytest.approx(
            sharp_minima.evaluate(model, prob.x_test, prob.y_test)[1]
        )


def test_with_weights_round_trips(prob):
    a = sharp_minima.build_model(TINY, prob, seed=0)
    weights = torch.nn.utils.parameters_to_vector(a.parameters()).detach().numpy()
    b = sharp_minima.with_weights(sharp_minima.build_model(TINY, prob, seed=3), weights)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_trial_refuses_an_unknown_arm():
    with pytest.raises(ValueError, match="arm must be one of 'small'"):
        sharp_minima.fit_trial("medium", sizes=TINY)


def test_sweep_trials_equal_their_serial_twins(prob):
    """Each trial fitted in a forked process ends at the same weights and measures as here."""
    config = arms.sweep_config(TINY, ("small", "large"))
    runs = results.by_arm([sweep.run(config, jobs=2, trial=sharp_minima.trial_for(TINY))], TINY)
    small, large = runs["small"], runs["large"]
    for name, side in runs.items():
        twin = sharp_minima.fit_trial(name, seed=0, sizes=TINY)
        assert side["steps"][0] == twin["steps"]
        assert (side["weights"][0] == twin["weights"]).all()
        for key in ("test_acc", "sharpness", "hessian", "train_loss"):
            assert side[key][0] == pytest.approx(twin[key], rel=1e-6), key
    assert all(small["fitted"] + large["fitted"])
    assert large["steps"][0] < small["steps"][0]
    assert "sharp %" in results.table(runs, TINY.momentum)
    a = sharp_minima.with_weights(sharp_minima.build_model(TINY, prob), small["weights"][0])
    b = sharp_minima.with_weights(sharp_minima.build_model(TINY, prob), large["weights"][0])
    alphas = sharp_minima.line_alphas(TINY)
    line = sharp_minima.along_line(a, b, prob, alphas, TINY.measure_samples)

    def closure(m):
        x, y = prob.measure_set(TINY.measure_samples)
        return torch.nn.functional.cross_entropy(m(x), y)

    assert line["train_loss"] == pytest.approx(
        landscape.loss_along_line(a, b, {"train": closure}, alphas)["train"], rel=1e-6
    )
    assert all(math.isfinite(v) for v in line["test_loss"])
    # 02's valley widths with the slip of the small-batch solution at both ends: the line
    # is one point, as wide on either side, and the verdict prints ✗
    same = sharp_minima.along_line(a, a, prob, alphas, TINY.measure_samples)["train_loss"]
    width = [sharp_minima.valley_width(alphas, same, end, TINY.valley_rise) for end in (0, 1)]
    assert not verdicts.valley_narrower([tuple(width)], 0.8)
    assert plots.sharpness_by_arm({"small": small, "large": large}).axes
    assert plots.line_between_solutions(alphas, [line]).axes


def test_the_arm_verdicts_fail_for_a_sweep_whose_large_arm_is_the_small_one(capsys):
    """02's sweep and `by_arm` as the notebook runs them, with the slip of the large arm's
    batch and lr set to the small arm's: the two arms are one run, so nothing separates
    them, and each verdict on the pair prints ✗."""
    alike = dataclasses.replace(TINY, large_batch=TINY.small_batch, large_lr=TINY.small_lr)
    config = arms.sweep_config(alike, ("small", "large"))
    runs = results.by_arm([sweep.run(config, jobs=2, trial=sharp_minima.trial_for(alike))], alike)
    small, large = runs["small"], runs["large"]
    assert not verdicts.more_passes(small, large)
    assert not verdicts.fewer_updates(small, large)
    assert not verdicts.tests_worse(small, large, "the large arm", "the small one")
    assert not verdicts.sharper(small, large, "the large arm", "the small one")
    assert capsys.readouterr().out.count("✗") == 4


def _arms(sizes, names) -> dict:
    """02's search and `by_arm`, as the notebook runs them, for the arms `names`."""
    config = arms.sweep_config(sizes, names)
    return results.by_arm([sweep.run(config, jobs=2, trial=sharp_minima.trial_for(sizes))], sizes)


def test_a_step_budget_the_small_batch_cannot_fit_in_fails_every_run_fits(capsys):
    """The slip of a step budget of 100 updates: the small batch needs 176 to fit, stops
    unfitted, and the verdict prints ✗ (with TINY's 3,000 both arms fit: ✓)."""
    assert verdicts.every_run_fits(_arms(TINY, ("small", "large")), TINY.fit_accuracy)
    short = dataclasses.replace(TINY, max_steps=100)
    assert not verdicts.every_run_fits(_arms(short, ("small", "large")), TINY.fit_accuracy)
    assert capsys.readouterr().out.splitlines()[-1].startswith("✗ every run fits")


def test_a_warmup_that_never_ends_changes_much(capsys):
    """The slip of a warmup far longer than the run (100,000 updates): the large batch
    trains at the small batch's lr/B throughout, 380 updates where the right warmup takes
    60, and ends 1.7 points higher with a top eigenvalue 1.26x the plain run's (right
    warmup: 0.2 points, 0.87x)."""
    right = _arms(TINY, ("large", "large, warmup"))
    assert verdicts.warmup_changes_little(right["large"], right["large, warmup"])
    endless = _arms(dataclasses.replace(TINY, warmup_updates=100_000), ("large", "large, warmup"))
    assert not verdicts.warmup_changes_little(endless["large"], endless["large, warmup"])
    assert capsys.readouterr().out.splitlines()[-1].startswith("✗ the warmup alone")


def test_a_failed_trial_is_reported():
    result = sweep.run(
        arms.sweep_config(TINY, ("small", "large")),
        jobs=2,
        trial=sharp_minima.trial_for(dataclasses.replace(TINY, large_batch=-1)),
    )
    with pytest.raises(RuntimeError, match="failed"):
        results.by_arm([result], TINY)


def test_each_arm_runs_at_its_batch_lr_and_warmup():
    k = TINY.large_batch / TINY.small_batch
    assert (arms.batch_of(TINY, "small"), arms.lr_of(TINY, "small")) == (16, TINY.small_lr)
    assert (arms.batch_of(TINY, "large"), arms.lr_of(TINY, "large")) == (256, TINY.large_lr)
    assert arms.lr_of(TINY, "large at small lr/B") == pytest.approx(TINY.small_lr * k)
    assert arms.lr_of(TINY, "small at large lr/B") == pytest.approx(TINY.large_lr / k)
    for name in ("large", "small", "small at large lr/B"):
        assert arms.warmup_of(TINY, name) is None
    for name in ("large, warmup", "large at small lr/B"):
        warmup = arms.warmup_of(TINY, name)
        assert warmup(0) == pytest.approx(1 / k)
        assert warmup(TINY.warmup_updates) == 1.0
    assert arms.label(TINY, "large at small lr/B") == "batch 256, lr 0.8, warmup"
    assert arms.edge_of_stability(0.1, 0.9) == pytest.approx(38.0)
    assert arms.edge_of_stability(0.1, 0.0) == pytest.approx(20.0)


def test_the_notebooks_search_runs_the_slow_arm_first_and_pairs_by_seed():
    """One search: the slow arm on its own seeds, listed first so that it starts at once;
    `by_arm` reads each trial's run, and arms are compared only at the seeds both ran."""
    sizes = dataclasses.replace(TINY, seeds=(0, 1), slow_arm_seeds=(1,))
    (config,) = arms.sweep_configs(sizes)
    listed = config["parameters"]["run"]["values"]
    assert listed[0] == arms.run_name(arms.SLOW, 1) and len(listed) == 1 + 2 * (len(arms.ARMS) - 1)
    assert arms.arm_and_seed({"run": listed[0]}) == (arms.SLOW, 1)
    with pytest.raises(ValueError, match="arm"):
        arms.run_name("medium", 0)
    done = [sweep.run(config, jobs=2, trial=sharp_minima.trial_for(sizes))]
    runs = results.by_arm(done, sizes)
    assert list(runs) == list(arms.ARMS)
    assert runs[arms.SLOW]["seed"] == [1] and runs["small"]["seed"] == [0, 1]
    assert all(all(side["fitted"]) for side in runs.values())
    assert runs[arms.SLOW]["lr"] == [pytest.approx(sizes.large_lr / 16)]
    assert len(results.gaps(runs["small"], runs[arms.SLOW])) == 1
