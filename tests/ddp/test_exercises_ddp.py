"""Notebook 04's checkers pass the reference solutions and explain the usual mistakes."""

from __future__ import annotations

import math

import pytest
import torch.distributed as dist
from reference import load_solution

from course_utils.ddp.exercises import (
    AVERAGE_CLAIM,
    STEPS_CLAIM,
    check_average_gradients,
    check_updates_per_epoch,
    sampler_updates,
)


def _solution():
    return load_solution("04_data_parallel.py")


def _failures(capsys) -> list[str]:
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("✗")]


def test_reference_solutions_pass(capsys):
    solution = _solution()
    assert check_average_gradients(solution.average_gradients)
    assert check_updates_per_epoch(solution.updates_per_epoch)
    assert not _failures(capsys)


def unsolved(model):
    raise NotImplementedError


def summed_only(model):
    for p in model.parameters():
        dist.all_reduce(p.grad)


def no_communication(model):
    pass


def test_averaging_mistakes_are_explained(capsys):
    assert not check_average_gradients(unsolved)
    assert not check_average_gradients(summed_only)
    assert not check_average_gradients(no_communication)
    lines = _failures(capsys)
    assert lines[0] == "✗ not solved yet"
    assert "divide the summed gradients by N" in lines[1]
    assert "every rank must all_reduce every gradient" in lines[2]


def test_counting_mistakes_are_explained(capsys):
    assert not check_updates_per_epoch(lambda s, n, b: None)
    assert not check_updates_per_epoch(lambda s, n, b: s // b)
    assert not check_updates_per_epoch(lambda s, n, b: -(-s // (n * b)))
    lines = _failures(capsys)
    assert lines[0] == "✗ not solved yet"
    assert "N times fewer updates" in lines[1]
    assert "drop_last" in lines[2]


def test_the_course_own_answers_are_refused(capsys):
    from course_utils.ddp import equivalence

    assert not check_average_gradients(equivalence.average_gradients)
    assert not check_updates_per_epoch(equivalence.steps_per_epoch)
    assert not check_updates_per_epoch(lambda s, n, b: equivalence.steps_per_epoch(s, n, b))
    assert not check_updates_per_epoch(sampler_updates)
    assert not check_updates_per_epoch(lambda s, n, b: sampler_updates(s, n, b))
    assert _failures(capsys) == [
        "✗ this is the course's own average_gradients: write yours",
        "✗ this is the course's own steps_per_epoch: write yours",
        "✗ this is the course's own steps_per_epoch: write yours",
        "✗ this is the course's own updates_per_epoch: write yours",
        "✗ this is the course's own updates_per_epoch: write yours",
    ]


def test_averaging_that_calls_the_course_own_is_refused_on_the_ranks(capsys):
    from course_utils import ddp

    assert not check_average_gradients(lambda model: ddp.average_gradients(model), steps=2)
    assert _failures(capsys) == ["✗ this is the course's own average_gradients: write yours"]


def halved(model):
    """The sum divided by 2, typed in: right on 2 ranks only."""
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= 2


def test_averaging_by_a_typed_in_world_size_fails_on_3_ranks(capsys):
    assert not check_average_gradients(halved, steps=2)
    assert _failures(capsys) == [
        f"✗ {AVERAGE_CLAIM}: right on 2 ranks but not on 3: divide by dist.get_world_size(), "
        "not by a number typed in"
    ]


def test_a_count_typed_in_for_one_case_fails(capsys):
    assert not check_updates_per_epoch(lambda s, n, b: 250)  # right for 8000 on 4 x 8
    assert _failures(capsys) == [
        f"✗ {STEPS_CLAIM}: 250 for every case tried: count from the arguments, not a number "
        "typed in"
    ]


def padded_with_drop_last(samples, world_size, per_rank_batch):
    """Every rank gets ceil(samples / N), as if DistributedSampler padded."""
    return math.ceil(samples / world_size) // per_rank_batch


def never_padded(samples, world_size, per_rank_batch, drop_last=True):
    per_rank = samples // world_size
    return per_rank // per_rank_batch if drop_last else math.ceil(per_rank / per_rank_batch)


def always_dropped(samples, world_size, per_rank_batch, drop_last=True):
    return samples // world_size // per_rank_batch


def padded_both_ways(samples, world_size, per_rank_batch, drop_last=True):
    per_rank = math.ceil(samples / world_size)
    return per_rank // per_rank_batch if drop_last else math.ceil(per_rank / per_rank_batch)


@pytest.mark.parametrize(
    "learner, named",
    [
        (padded_with_drop_last, "padded although drop_last=True (999 samples on 4 ranks"),
        (padded_both_ways, "padded although drop_last=True (999 samples on 4 ranks"),
        (never_padded, "forgot the padding (1001 samples on 4 ranks"),
        (always_dropped, "dropped samples although drop_last=False (6400 samples on 4 ranks"),
    ],
)
def test_each_sampler_mistake_is_named(capsys, learner, named):
    assert not check_updates_per_epoch(learner)
    line = _failures(capsys)[0]
    assert line.startswith(f"✗ {STEPS_CLAIM}: {named}"), line


def test_a_count_that_takes_drop_last_is_checked_both_ways(capsys):
    def padded_unless_dropped(samples, world_size, per_rank_batch, drop_last=True):
        if drop_last:
            return samples // world_size // per_rank_batch
        return math.ceil(math.ceil(samples / world_size) / per_rank_batch)

    assert check_updates_per_epoch(padded_unless_dropped)
    assert sampler_updates(1001, 4, 10, drop_last=False) == 26  # 251 samples each, padded
    assert sampler_updates(1001, 4, 10, drop_last=True) == 25
    assert not _failures(capsys)
