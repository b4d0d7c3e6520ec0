"""Notebook 03's verdicts on where linear scaling stops: each fed a case where the effect is
absent must print ✗, and the summary must read the sweeps as the notebook expects."""

from __future__ import annotations

import dataclasses

import pytest

from course_utils.core import profiles
from course_utils.lr_scaling import experiments, limits, verdicts
from course_utils.sgd.sweep import SweepResult, Trial

SIZES = dataclasses.replace(
    profiles.get("cpu").scaling, base_batch=8, batch_sizes=(8, 32, 128, 512), seeds=(0, 1)
)
BASE = 0.7


def _result(config, rows) -> SweepResult:
    trials = [Trial(i, params, metrics) for i, (params, metrics) in enumerate(rows)]
    return SweepResult(config, 2, 1.0, trials)


def _metrics(acc, steps=10, noise=None):
    loss = 0.5 if acc > 0.4 else (2.0 if acc > 0.3 else float("nan"))  # trains, stalls, diverges
    return {"test_acc": acc, "train_loss": loss, "curve": [2.0, loss], "steps": steps,
            "noise_scale": noise}  # fmt: skip


def sweeps(table: dict, base_accs=(BASE, BASE), noise=100.0):
    """`table`: batch -> (fixed, scaled, warmup, sqrt) accuracies, the same for every seed."""
    base = _result(
        experiments.base_config(SIZES),
        [({"batch_size": 8, "rule": "unscaled", "seed": s}, _metrics(a, 400, noise))
         for s, a in enumerate(base_accs)],
    )  # fmt: skip
    rows = [
        ({"batch_size": b, "rule": r, "seed": s}, _metrics(accs[k], 3200 // b))
        for b, accs in table.items()
        for k, r in enumerate(experiments.RULES)
        for s in SIZES.seeds
    ]
    return base, _result(experiments.sweep_config(SIZES), rows)


WORKS = {32: (0.6, 0.7, 0.7, 0.65), 128: (0.4, 0.7, 0.69, 0.6), 512: (0.2, 0.1, 0.1, 0.5)}


def summary_of(table=WORKS, **kw):
    return limits.summarize(*sweeps(table, **kw), base_batch=8, tolerance=0.02)


def test_summary_finds_the_limit_within_the_tolerance():
    s = summary_of()
    assert s.kept == [True, True, True, False] and s.limit == 128 and s.beyond == [512]
    assert s.failed("warmup", 1.5) == [False, False, False, True]
    assert s.noise_scale == 100.0 and s.steps["warmup"] == [400, 100, 25, 6]
    assert "lr x sqrt(k) + warmup" in s.table()


def test_half_won_back_is_not_kept():
    """The old rule kept a batch that won back half of what the fixed lr lost: no more."""
    s = summary_of({32: (0.5, 0.7, 0.6, 0.6), 128: (0.4, 0.7, 0.69, 0.6)})
    assert s.kept == [True, False, True] and s.limit is None


def test_a_failed_trial_is_reported_not_averaged():
    base, result = sweeps(WORKS)
    result.trials[0].metrics, result.trials[0].error = None, "ValueError: boom"
    with pytest.raises(RuntimeError, match="boom"):
        limits.summarize(base, result, 8, 0.02)


def test_repeatability_fails_when_the_base_seeds_disagree():
    assert verdicts.base_is_repeatable(summary_of()).ok
    assert not verdicts.base_is_repeatable(summary_of(base_accs=(0.7, 0.67))).ok


def test_kept_and_breaks_fail_without_a_limit():
    assert verdicts.kept_up_to(summary_of(), 16).ok and verdicts.breaks_beyond(summary_of()).ok
    everywhere = {b: (0.3, 0.7, 0.7, 0.6) for b in (32, 128, 512)}
    assert not verdicts.breaks_beyond(summary_of(everywhere)).ok  # the rule never breaks
    assert not verdicts.kept_up_to(summary_of(), 64).ok
    nowhere = {b: (0.3, 0.1, 0.1, 0.6) for b in (32, 128, 512)}
    assert not verdicts.kept_up_to(summary_of(nowhere), 4).ok


def test_sqrt_verdict_fails_when_sqrt_wins_within_the_limit():
    s = summary_of()
    assert verdicts.linear_ahead_within_limit(s).ok and verdicts.sqrt_ahead_at_the_largest(s).ok
    sqrt_better = {32: (0.6, 0.7, 0.69, 0.71), 128: (0.4, 0.7, 0.69, 0.7), 512: WORKS[512]}
    assert not verdicts.linear_ahead_within_limit(summary_of(sqrt_better)).ok
    linear_better = {**WORKS, 512: (0.2, 0.1, 0.45, 0.44)}
    assert not verdicts.sqrt_ahead_at_the_largest(summary_of(linear_better)).ok


def _controls(budget_acc, long_acc, budget_loss=0.6):
    config = experiments.controls_config(SIZES, [512], 0.16, 25)
    rows = [
        ({"batch_size": 512, "rule": "capped", "seed": s, "lr_cap": 0.16, "updates": u},
         {"test_acc": a, "train_loss": budget_loss if u == 0 else 0.3, "steps": u or 6})
        for s in SIZES.seeds
        for u, a in ((0, budget_acc), (25, long_acc))
    ]  # fmt: skip
    return limits.controls(_result(config, rows))


def test_control_verdicts_fail_when_their_effect_is_absent():
    s = summary_of()
    found = _controls(0.6, 0.69)
    assert found.budget_acc == [0.6] and found.long_acc == [0.69] and found.budget_steps == [6]
    assert verdicts.unstable_at_the_largest(s, found, 1.5).ok
    assert verdicts.too_few_updates(s, found).ok and verdicts.equal_updates_keep(s, found).ok
    # capped, the run fails as well: not the lr's instability
    assert not verdicts.unstable_at_the_largest(s, _controls(0.1, 0.69, budget_loss=2.3), 1.5).ok
    # capped in the same epochs it already keeps the accuracy: updates were not short
    assert not verdicts.too_few_updates(s, _controls(0.695, 0.69)).ok
    # more updates do not bring it back: a worse place, not a shortage of steps
    assert not verdicts.equal_updates_keep(s, _controls(0.6, 0.6)).ok
    # the scaled run did not fail at the largest batch: nothing to separate
    trains = summary_of({**WORKS, 512: (0.2, 0.5, 0.5, 0.5)})
    assert not verdicts.unstable_at_the_largest(trains, found, 1.5).ok


def test_noise_scale_verdict_fails_far_from_the_limit():
    near = verdicts.limit_near_noise_scale
    assert near(summary_of(noise=200.0), 1.25, 150.0).ok  # limit 128, lost 512: 102 to 640
    assert not near(summary_of(noise=90.0), 1.25, 150.0).ok  # below the limit / 1.25
    assert not near(summary_of(noise=700.0), 1.25, 150.0).ok  # above the lost batch x 1.25
    assert not near(summary_of(noise=200.0), 1.25, 1000.0).ok  # notebook 01's is far off
    assert not near(summary_of(noise=None), 1.25, 150.0).ok
    assert not near(summary_of(noise=200.0), 1.25, None).ok


def test_titles_say_what_the_curves_did():
    s = summary_of()
    titles = limits.curve_titles(s, 1.5)
    assert titles["scaled"].endswith("until batch 512 diverges in 2 of 2 seeds")
    assert limits.rescue_title([], [512]).startswith("warmup does not make every seed train at")
    assert limits.rescue_title([1024], [1024, 2048]) == (
        "warmup lets batch 1024 train again; at 2048 it fails too"
    )
    assert (
        limits.rescue_title([512, 1024], [512, 1024])
        == "warmup lets batches 512 and 1024 train again"
    )
    assert limits.batch_list([8, 32, 128]) == "8, 32 and 128" and limits.batch_list([]) == "none"
    assert "up to batch 128" in limits.limit_title(s)
    assert "every batch" in limits.limit_title(summary_of({32: (0.3, 0.1, 0.1, 0.6)}))


def test_one_stalled_seed_in_three_fails_a_rule_that_the_mean_would_pass():
    base, result = sweeps(WORKS)
    for t in result.trials:  # batch 128 scaled: one seed stalls, the mean loss (1.25) passes
        if (t.params["batch_size"], t.params["rule"], t.params["seed"]) == (128, "scaled", 1):
            t.metrics = {**t.metrics, "train_loss": 2.0}
    s = limits.summarize(base, result, 8, 0.02)
    assert s.final_loss["scaled"][2] == pytest.approx(1.25)
    assert s.stalled("scaled", 1.5) == [0, 0, 1, 2] and s.failed("scaled", 1.5)[2]


def test_rescue_verdicts_fail_where_warmup_does_rescue(capsys):
    rescued = {**WORKS, 512: (0.2, 0.1, 0.7, 0.5)}  # warmup trains every seed where scaled fails
    assert verdicts.scaled_stalls_at_the_largest(summary_of(rescued), 1.5).ok
    assert not verdicts.warmup_rescues_none(summary_of(rescued), 1.5).ok
    assert verdicts.warmup_rescues_none(summary_of(), 1.5).ok  # warmup fails too
    trains = {**WORKS, 512: (0.2, 0.7, 0.7, 0.5)}  # the scaled lr trains at the largest batch
    assert not verdicts.scaled_stalls_at_the_largest(summary_of(trains), 1.5).ok
    assert not verdicts.warmup_rescues_none(summary_of(trains), 1.5).ok  # nothing stalled
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == "✗ at the largest batch the scaled lr alone stalls or diverges in every seed"


def test_equal_updates_verdict_is_one_sided(capsys):
    s = summary_of()
    assert verdicts.equal_updates_keep(s, _controls(0.6, 0.75)).ok  # far above the base passes
    assert not verdicts.equal_updates_keep(s, _controls(0.6, 0.67)).ok  # 3 points below fails
    assert "no batch beyond the limit ends more than the tolerance below" in capsys.readouterr().out


def test_sqrt_verdicts_say_the_epochs_are_the_same(capsys):
    s = summary_of()
    verdicts.linear_ahead_within_limit(s)
    verdicts.sqrt_ahead_at_the_largest(s)
    lines = capsys.readouterr().out.splitlines()
    assert all("in the same epochs" in line for line in lines)
    assert "by more than the tolerance" in lines[-1]
    close = {**WORKS, 512: (0.2, 0.1, 0.45, 0.46)}  # sqrt ahead, but within the tolerance
    assert not verdicts.sqrt_ahead_at_the_largest(summary_of(close)).ok
