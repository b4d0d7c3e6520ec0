"""Notebook 00's checker accepts the reference solution and explains each usual mistake."""

from __future__ import annotations

import torch
import torch.distributed as dist
from reference import load_solution

from course_utils.ranks.exercises import check_largest_square


def _solution():
    return load_solution("00_launching.py").largest_square


def test_reference_solution_passes(capsys):
    assert check_largest_square(_solution())
    assert capsys.readouterr().out.startswith("✓")


def unsolved():
    raise NotImplementedError


def kept_own():
    return (dist.get_rank() + 1) ** 2


def summed():
    t = torch.tensor([(dist.get_rank() + 1) ** 2])
    dist.all_reduce(t)
    return t


def test_mistakes_are_explained(capsys):
    assert not check_largest_square(unsolved, world_sizes=2)
    assert not check_largest_square(kept_own, world_sizes=2)
    assert not check_largest_square(summed, world_sizes=2)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("✗")]
    assert lines[0] == "✗ not solved yet"
    assert "call dist.all_reduce" in lines[1]
    assert "ReduceOp.MAX" in lines[2]


def _sixteen():
    return 16


def test_an_answer_typed_in_for_four_ranks_fails_on_three(capsys):
    assert not check_largest_square(_sixteen)
    assert "(on 3 ranks)" in capsys.readouterr().out
