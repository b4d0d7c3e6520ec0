"""Data parallel from parallel/ equals one process with the whole batch, on a model a
learner might bring (a tied weight, an unused layer, AdamW), and overlaps its all-reduces
with the backward pass."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from course_utils.network.recorder import recording
from course_utils.parallel.data_parallel import (
    DataParallel,
    average_gradients,
    buckets_in_backward_order,
)
from course_utils.ranks.launch import launch

STEPS, BATCH = 3, 8


class _Tied(nn.Module):
    """`out` shares `mid`'s weight; `unused` takes part only when asked to."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.inp, self.mid, self.out, self.unused = (nn.Linear(6, 8), nn.Linear(8, 8),
                                                     nn.Linear(8, 8), nn.Linear(8, 8))  # fmt: skip
        self.out.weight = self.mid.weight

    def forward(self, x, use_unused: bool = False):
        h = torch.relu(self.mid(torch.relu(self.inp(x))))
        return self.out(h) + (self.unused(h) if use_unused else 0)


def _batches():
    gen = torch.Generator().manual_seed(1)
    return torch.randn(STEPS, BATCH, 6, generator=gen), torch.randn(STEPS, BATCH, 8, generator=gen)


def _train(model: nn.Module, xs, ys, sync) -> dict:
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    for x, y in zip(xs, ys, strict=True):
        opt.zero_grad(set_to_none=True)
        F.mse_loss(model(x), y).backward()
        sync(model)
        opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _on_rank(how: str) -> dict:
    rank, n = dist.get_rank(), dist.get_world_size()
    xs, ys = (t.chunk(n, dim=1)[rank] for t in _batches())
    if how == "by_hand":
        return _train(_Tied(), xs, ys, average_gradients)
    replica = DataParallel(_Tied(), bucket_bytes=300)  # several buckets
    trained = _train(replica, xs, ys, DataParallel.finish_gradient_sync)
    return {k.removeprefix("module."): v for k, v in trained.items()}


@pytest.mark.parametrize("how", ["by_hand", "buckets"])
def test_two_ranks_equal_one_process_with_a_tied_weight_an_unused_layer_and_adamw(how):
    one = _train(_Tied(), *_batches(), lambda model: None)
    untouched = _Tied().unused.weight.detach()
    for got in launch(_on_rank, 2, args=(how,)):
        assert got.keys() == one.keys()
        for name, value in one.items():
            assert torch.allclose(got[name], value, atol=1e-6), name
        assert torch.equal(got["unused.weight"], untouched)  # no gradient: AdamW skipped it


def _first_layer_sees_messages() -> tuple[int, int]:
    replica = DataParallel(_Tied(), bucket_bytes=300)
    x, y = (t[0].chunk(2)[dist.get_rank()] for t in _batches())
    for _ in range(2):  # the first step drops the unused layer from the buckets
        seen = []
        with recording() as log:
            hook = replica.module.inp.register_full_backward_pre_hook(
                lambda *_, seen=seen, log=log: seen.append(len(log.messages))
            )
            F.mse_loss(replica(x), y).backward()
            replica.finish_gradient_sync()
            hook.remove()
    return seen[0], len(log.collectives())


def test_buckets_start_while_the_backward_pass_still_runs():
    """Read from outside: in the second step, when backward reaches the first layer, the
    buckets of the later layers have been handed to torch.distributed already."""
    for before_first_layer, buckets in launch(_first_layer_sees_messages, 2):
        assert 0 < before_first_layer < buckets


def _used_on_rank_0_only() -> tuple:
    replica = DataParallel(_Tied())
    x, y = (t[0].chunk(2)[dist.get_rank()] for t in _batches())
    F.mse_loss(replica(x, use_unused=dist.get_rank() == 0), y).backward()
    mine = replica.module.unused.weight.grad
    mine = None if mine is None else mine.clone()
    replica.finish_gradient_sync()
    return mine, replica.module.unused.weight.grad


def test_a_layer_one_rank_did_not_use_gets_the_average_with_zeros_and_nothing_hangs():
    (own, averaged_0), (none, averaged_1) = launch(_used_on_rank_0_only, 2, timeout=30)
    assert none is None and own is not None
    assert torch.allclose(averaged_0, own / 2) and torch.allclose(averaged_1, own / 2)


def test_buckets_hold_the_last_parameters_first_and_a_large_one_alone():
    params = [nn.Parameter(torch.zeros(n)) for n in (10, 1, 1, 100)]  # 40, 4, 4, 400 bytes
    buckets = buckets_in_backward_order(params, bucket_bytes=48)
    assert [[p.numel() for p in b] for b in buckets] == [[100], [1, 1, 10]]
    assert buckets_in_backward_order([], 48) == []


def _unused_first_then_used() -> None:
    replica = DataParallel(_Tied())
    x, y = (t[0].chunk(2)[dist.get_rank()] for t in _batches())
    for use_unused in (False, True):
        F.mse_loss(replica(x, use_unused=use_unused), y).backward()
        replica.finish_gradient_sync()


def test_a_parameter_first_used_after_the_first_step_is_refused_with_what_to_do():
    from course_utils.core.errors import LaunchError

    with pytest.raises(LaunchError, match="use every parameter from the first step on"):
        launch(_unused_first_then_used, 2, timeout=30)
