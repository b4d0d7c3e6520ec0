"""Notebook 02's control and line verdicts: each fed a case where the effect is absent prints ✗."""

from __future__ import annotations

from course_utils.sharp_minima import results

SMALL = {"test_acc": [0.71, 0.72], "sharpness": [6.0, 6.5], "hessian": [5.0, 5.5]}
LARGE = {"test_acc": [0.68, 0.69], "sharpness": [17.0, 16.0], "hessian": [15.0, 14.0]}


def test_gaps_are_per_seed():
    assert [round(g, 4) for g in results.gaps(SMALL, LARGE)] == [0.03, 0.03]


def test_control_verdicts_pass_when_lr_over_b_explains_the_effect():
    control = {"test_acc": [0.71, 0.715], "sharpness": [5.0, 4.0], "hessian": [3.0, 3.5]}
    assert results.control_closes_gap(SMALL, LARGE, control).ok
    assert results.control_is_flatter(SMALL, LARGE, control).ok


def test_control_verdicts_fail_when_the_batch_itself_carries_the_effect():
    """A control as bad as the large batch: the gap and the sharpness belong to the batch."""
    assert not results.control_closes_gap(SMALL, LARGE, LARGE).ok
    assert not results.control_is_flatter(SMALL, LARGE, LARGE).ok
    half = {"test_acc": [0.69, 0.70], "sharpness": [5.0, 4.0], "hessian": [10.0, 9.0]}
    assert not results.control_closes_gap(SMALL, LARGE, half).ok  # 2 of 3 points kept
    assert not results.control_is_flatter(SMALL, LARGE, half).ok  # flatter by one measure only
    assert not results.control_closes_gap(SMALL, SMALL, SMALL).ok  # no gap to explain


def test_line_barrier_fails_on_a_flat_line():
    assert results.line_has_barrier([5.0, 3.8], 1.5).ok
    assert not results.line_has_barrier([5.0, 1.2], 1.5).ok
    assert not results.line_has_barrier([], 1.5).ok


def test_line_chart_title_names_the_narrower_end():
    from course_utils.sharp_minima import charts

    alphas = [x / 10 for x in range(-10, 21)]

    def line(wide_at, narrow_at):  # a parabola in each half, the narrow one steeper
        loss = [(a - wide_at) ** 2 if a < 0.5 else 9 * (a - narrow_at) ** 2 for a in alphas]
        return {"train_loss": loss, "test_loss": loss, "train_acc": alphas, "test_acc": alphas}

    title = charts.line_between_solutions(alphas, [line(0, 1)], ("A", "B"))._suptitle.get_text()
    assert title.endswith("past the B end")
    flipped = [{k: v[::-1] for k, v in line(0, 1).items()}]
    title = charts.line_between_solutions(alphas, flipped, ("A", "B"))._suptitle.get_text()
    assert title.endswith("past the A end")
