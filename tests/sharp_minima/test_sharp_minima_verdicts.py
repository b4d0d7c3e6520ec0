"""Notebook 02's verdicts and chart titles: each fed a case where the effect is absent prints ✗
(or falls back to a plain title)."""

from __future__ import annotations

import pytest

from course_utils.sharp_minima import charts, results, verdicts


def arm(batch, lr, acc, sharp, eig, seeds=(0, 1), **extra):
    n = len(seeds)
    return {
        "seed": list(seeds),
        "batch_size": [batch] * n,
        "lr": [lr] * n,
        "test_acc": list(acc),
        "sharpness": list(sharp),
        "hessian": list(eig),
        "fitted": [True] * n,
        "train_acc": [0.999] * n,
        **extra,
    }


# lr/B sets everything: the two arms at lr/B 0.01/32 are flat and test well, the two at
# 0.05/1024 (a 6.4x lower lr/B) are sharp and test worse, whichever their batch.
SMALL = arm(32, 0.01, [0.71, 0.72], [6.0, 6.5], [5.0, 5.5], epochs=[43, 45], steps=[8600, 9000])
LARGE = arm(
    1024, 0.05, [0.68, 0.69], [17.0, 16.0], [15.0, 14.0], epochs=[200, 216], steps=[1400, 1512]
)
WARM = arm(1024, 0.05, [0.685, 0.68], [16.5, 17.0], [15.5, 14.0])
CONTROL = arm(1024, 0.32, [0.715, 0.716], [5.0, 4.0], [4.0, 4.5])
SLOW = arm(32, 0.05 * 32 / 1024, [0.675], [14.6], [14.9], seeds=(0,))
RUNS = {"small": SMALL, "large": LARGE, "large, warmup": WARM, "control": CONTROL, "slow": SLOW}


def test_gaps_pair_by_seed():
    assert [round(g, 4) for g in results.gaps(SMALL, LARGE)] == [0.03, 0.03]
    assert [round(g, 4) for g in results.gaps(SMALL, SLOW)] == [0.035]  # only seed 0 ran both
    assert results.points([0.034, 0.037, 0.026]) == "[3.4, 3.7, 2.6] (2.6 to 3.7)"


def test_fit_verdict_fails_on_one_unfitted_run():
    assert verdicts.every_run_fits(RUNS, 0.98).ok
    unfitted = {**RUNS, "slow": {**SLOW, "fitted": [False]}}
    assert not verdicts.every_run_fits(unfitted, 0.98).ok
    assert not verdicts.every_run_fits({"small": {**SMALL, "train_acc": [0.97, 0.99]}}, 0.98).ok


def test_passes_and_updates_verdicts_fail_when_the_large_batch_is_not_slower_per_pass():
    assert verdicts.more_passes(SMALL, LARGE).ok and verdicts.fewer_updates(SMALL, LARGE).ok
    assert not verdicts.more_passes(SMALL, SMALL).ok
    assert not verdicts.fewer_updates(SMALL, {**LARGE, "steps": [8000, 9500]}).ok


def test_tests_worse_needs_every_seed_and_a_mean_over_the_threshold():
    assert verdicts.tests_worse(SMALL, LARGE, "the large batch", "the small").ok
    assert verdicts.tests_worse(SMALL, SLOW, "the slow arm", "the small").ok
    assert not verdicts.tests_worse(SMALL, CONTROL, "the control", "the small").ok  # no gap
    one_seed = {**LARGE, "test_acc": [0.66, 0.725]}  # 5 points worse, then 0.5 better
    assert not verdicts.tests_worse(SMALL, one_seed, "x", "y").ok
    assert not verdicts.tests_worse(SMALL, {**LARGE, "test_acc": [0.705, 0.714]}, "x", "y").ok


def test_tests_as_well_fails_when_one_seed_keeps_the_gap():
    assert verdicts.tests_as_well(SMALL, CONTROL, "the control", "the small").ok
    assert not verdicts.tests_as_well(SMALL, LARGE, "the large batch", "the small").ok
    assert not verdicts.tests_as_well(SMALL, {**CONTROL, "test_acc": [0.715, 0.70]}, "x", "y").ok


def test_sharper_needs_both_measures_every_seed_and_the_factor():
    assert verdicts.sharper(SMALL, LARGE, "the large batch", "the small").ok
    assert not verdicts.sharper(SMALL, CONTROL, "the control", "the small").ok
    one_measure = {**LARGE, "hessian": [5.5, 5.0]}
    assert not verdicts.sharper(SMALL, one_measure, "x", "y").ok
    one_seed = {**LARGE, "sharpness": [40.0, 6.0]}  # 1.5x on average, but not at seed 1
    assert not verdicts.sharper(SMALL, one_seed, "x", "y").ok


def test_warmup_verdict_fails_when_the_warmup_carries_the_effect():
    assert verdicts.warmup_changes_little(LARGE, WARM).ok
    assert not verdicts.warmup_changes_little(LARGE, {**CONTROL, "lr": LARGE["lr"]}).ok
    flatter_only = {**WARM, "hessian": [9.0, 9.0]}
    assert not verdicts.warmup_changes_little(LARGE, flatter_only).ok


def test_lr_verdict_fails_when_the_batch_orders_sharpness():
    """Keskar's picture: the small batch is flat at either lr, the large sharp at either."""
    assert verdicts.flatter_at_higher_lr(RUNS).ok
    keskar = {**RUNS, "slow": {**SLOW, "sharpness": [6.2], "hessian": [5.2]}}
    assert not verdicts.flatter_at_higher_lr(keskar).ok
    assert not verdicts.flatter_at_higher_lr({**RUNS, "slow": {**SLOW, "fitted": [False]}}).ok
    one_batch = {k: v for k, v in RUNS.items() if k != "slow"}  # batch 32 at one lr only
    assert not verdicts.flatter_at_higher_lr(one_batch).ok


def test_equal_lr_over_b_verdict_fails_when_the_batch_orders_sharpness():
    check = verdicts.larger_batch_not_sharper_at_equal_lr_over_b
    assert check(RUNS).ok
    keskar = {**RUNS, "slow": {**SLOW, "sharpness": [6.2], "hessian": [5.2]}}
    assert not check(keskar).ok
    sharp_control = {**RUNS, "control": {**CONTROL, "hessian": [10.0, 11.0]}}
    assert not check(sharp_control).ok
    assert not check({**RUNS, "control": {**CONTROL, "sharpness": [7.5, 8.0]}}).ok  # 1.24x
    assert check({**RUNS, "control": {**CONTROL, "hessian": [3.0, 3.3]}}).ok  # flatter: fine
    assert not check({"small": SMALL}).ok


def test_edge_of_stability_verdict_fails_for_a_run_at_the_edge():
    assert verdicts.below_edge_of_stability(RUNS, momentum=0.9).ok
    at_edge = {**RUNS, "control": {**CONTROL, "hessian": [3.0, 3.8 / 0.32]}}  # (2 + 2 * 0.9) / lr
    assert not verdicts.below_edge_of_stability(at_edge, momentum=0.9).ok


def test_line_verdicts_fail_on_a_flat_line_and_a_wide_large_batch_valley():
    assert verdicts.line_has_barrier([5.0, 3.8], 1.5).ok
    assert not verdicts.line_has_barrier([5.0, 1.2], 1.5).ok
    assert not verdicts.line_has_barrier([], 1.5).ok
    assert verdicts.valley_narrower([(0.7, 0.4), (0.68, 0.41)]).ok
    assert not verdicts.valley_narrower([(0.7, 0.4), (0.68, 0.6)]).ok
    assert verdicts.lowest_test_loss_near_small([0.0, 0.1]).ok
    assert not verdicts.lowest_test_loss_near_small([0.0, 0.9]).ok


def _title(sides) -> str:
    return charts.sharpness_by_arm(sides)._suptitle.get_text()


def test_arm_chart_title_says_what_separates_the_arms():
    assert (
        _title(RUNS)
        == "at either batch size, every run at the lower lr/B ends sharper and tests worse"
    )
    assert _title({"small": SMALL, "large": LARGE}) == (
        "every run of large ends sharper and tests worse than every run of small"
    )
    assert _title({"small": SMALL, "large": LARGE, "warm": WARM}) == (
        "every run at the lower lr/B ends sharper and tests worse"
    )
    keskar = {**RUNS, "slow": {**SLOW, "sharpness": [6.2], "hessian": [5.2], "test_acc": [0.72]}}
    assert _title(keskar) == "test accuracy and sharpness of each fitted run"
    unfitted = {**RUNS, "slow": {**SLOW, "fitted": [False]}}
    assert _title(unfitted) == "test accuracy and sharpness of each run"
    plain = {"a": {k: SMALL[k] for k in ("test_acc", "sharpness", "hessian")}}
    assert _title(plain) == "test accuracy and sharpness of each fitted run"


def test_arm_chart_zooms_accuracy_and_names_the_extremes():
    fig = charts.sharpness_by_arm(RUNS)
    low, high = fig.axes[0].get_ylim()
    assert 66 < low < 67.5 and 72 < high < 73  # 67.5 to 72 percent, padded
    assert fig.axes[1].get_ylim()[0] == 0
    assert fig.axes[0].get_title() == "slow tests worst"
    assert fig.axes[1].get_title() == "large, warmup is sharpest"
    assert fig.axes[2].get_title() == "slow is sharpest"


def test_line_chart_title_names_the_narrower_end():
    alphas = [x / 10 for x in range(-10, 21)]

    def line(wide_at, narrow_at):  # a parabola in each half, the narrow one steeper
        loss = [(a - wide_at) ** 2 if a < 0.5 else 9 * (a - narrow_at) ** 2 for a in alphas]
        return {"train_loss": loss, "test_loss": loss, "train_acc": alphas, "test_acc": alphas}

    title = charts.line_between_solutions(alphas, [line(0, 1)], ("A", "B"))._suptitle.get_text()
    assert title.endswith("past the B end")
    flipped = [{k: v[::-1] for k, v in line(0, 1).items()}]
    title = charts.line_between_solutions(alphas, flipped, ("A", "B"))._suptitle.get_text()
    assert title.endswith("past the A end")
    level = [{k: [1.0] * len(alphas) for k in line(0, 1)}]
    title = charts.line_between_solutions(alphas, level, ("A", "B"))._suptitle.get_text()
    assert title == "the loss along the line between the two solutions"


@pytest.mark.parametrize("name", ["SMALL", "LARGE", "CONTROL"])
def test_table_prints_the_edge_of_stability_beside_each_run(name):
    side = {**globals()[name], "epochs": [1, 2], "steps": [3, 4], "train_loss": [0.04, 0.05]}
    line = results.table({name: side}, momentum=0.9).splitlines()[1]
    assert line.split()[-1] == f"{3.8 / side['lr'][0]:.1f}"
