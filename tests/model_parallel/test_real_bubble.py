"""The bubble with real compute, timed on the ranks' link clocks, and its verdict."""

from __future__ import annotations

import pytest

from course_utils.model_parallel import bubble_matches, real_compute_run
from course_utils.model_parallel.schedules import bubble_formula


def test_real_compute_bubble_follows_the_formula_whatever_the_cores():
    run = real_compute_run("gpipe", 4, 4, width=2048, micro_batch_size=64)
    tl = run.timeline
    forward = [e.end - e.start for e in tl.events if e.kind == "F" and e.stage == 1]
    backward = [e.end - e.start for e in tl.events if e.kind == "B" and e.stage == 1]
    assert 1.4 < sum(backward) / sum(forward) < 3.0  # a backward: two matrix products
    assert tl.bubble_fraction() == pytest.approx(bubble_formula(4, 4), rel=0.2)


def test_bubble_verdict_fails_for_a_pipeline_with_a_stretched_stage():
    good = [{"measured": 0.76, "predicted": 0.75}, {"measured": 0.17, "predicted": 0.158}]
    assert bubble_matches(good).ok
    stretched = [{"measured": 0.76, "predicted": 0.75}, {"measured": 0.30, "predicted": 0.158}]
    assert not bubble_matches(stretched).ok


def test_an_unbalanced_stage_gets_more_blocks():
    run = real_compute_run("gpipe", 2, 2, width=128, micro_batch_size=8, stage_cost=(1, 2))
    assert len(run.grads) == 2 * 3  # weight and bias of 3 blocks
