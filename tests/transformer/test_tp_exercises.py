"""The f/g checker passes a correct pair (the reference solution lives here, not in the
package), names each classic mistake, and refuses the course's own operators."""

from __future__ import annotations

import torch
import torch.distributed as dist
from reference import load_solution

from course_utils.parallel import tensor_parallel
from course_utils.transformer import tp_exercises

SOLUTION = load_solution("10_transformer.py")
SolutionF, SolutionG = SOLUTION.F, SOLUTION.G


def _sum(t):
    t = t.clone()
    dist.all_reduce(t)
    return t


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class SumBothWays(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _sum(x)

    @staticmethod
    def backward(ctx, grad):
        return _sum(grad)


class Stub(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError


def test_the_reference_solution_passes_at_two_and_four_ranks(capsys):
    assert tp_exercises.check_f_and_g(SolutionF, SolutionG)
    assert capsys.readouterr().out.startswith("✓")


def test_each_classic_mistake_is_named(capsys):
    cases = {
        "f and g swapped": (SolutionG, SolutionF),
        "f's backward should all-reduce": (Identity, SolutionG),
        "g's forward should all-reduce": (SolutionF, Identity),
        "g's backward should pass the gradient on unchanged": (SolutionF, SumBothWays),
    }
    for named, (f, g) in cases.items():
        assert not tp_exercises.check_f_and_g(f, g, world_sizes=(2,))
        assert named in capsys.readouterr().out, named


def test_unsolved_and_the_course_s_own_are_not_accepted(capsys):
    assert not tp_exercises.check_f_and_g(Stub, SolutionG, world_sizes=(2,))
    assert not tp_exercises.check_f_and_g(None, SolutionG)
    assert capsys.readouterr().out.count("not solved yet") == 2
    own = tensor_parallel.CopyToTensorRegion, tensor_parallel.ReduceFromTensorRegion
    assert not tp_exercises.check_f_and_g(*own)
    assert "course's own" in capsys.readouterr().out
