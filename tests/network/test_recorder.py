"""The boundary: what crosses torch.distributed is counted, and charged on a simulated link,
from outside the code that sends it, the learner's as the course's."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from course_utils.allreduce.exercises import check_ring
from course_utils.network import labels, recorder, wire
from course_utils.network.messages import THROUGH_OTHERS
from course_utils.parallel.allreduce import ring_allreduce
from course_utils.ranks.launch import launch

SLOW = "8mbit,20ms"  # every message pays 20 ms: the wire, not the two cores, sets the time
NOT_COMMUNICATION = {  # set-up, queries and process-group plumbing: nothing crosses a link
    "destroy_process_group", "get_backend", "get_backend_config", "get_backend_impl",
    "get_debug_level", "get_default_backend_for_device", "get_global_rank", "get_group_rank",
    "get_node_local_rank", "get_pg_count", "get_process_group_ranks", "get_rank",
    "get_world_size", "init_process_group", "is_backend_available", "is_gloo_available",
    "is_initialized", "is_mpi_available", "is_nccl_available", "is_torchelastic_launched",
    "is_ucc_available", "is_xccl_available", "new_group", "new_subgroups",
    "new_subgroups_by_enumeration", "record_comm", "set_timeout", "shrink_group", "split_group",
    "supports_complex", "default_pg_timeout", "reduce_op",
}  # fmt: skip


def test_every_public_function_that_communicates_is_wrapped_or_goes_through_one_that_is():
    functions = [name for name in c10d.__all__ if name not in NOT_COMMUNICATION]
    public = {name for name in functions if inspect.isfunction(getattr(c10d, name, None))}
    known = set(recorder.POINT_TO_POINT) | set(recorder.COLLECTIVES) | set(THROUGH_OTHERS)
    assert public - known == set(), "a torch.distributed function this recorder does not know"
    wrapped = public - set(THROUGH_OTHERS)
    own = {name: getattr(dist, name) for name in wrapped}
    with recorder.recording():
        for name in wrapped:
            assert getattr(dist, name) is not own[name], f"{name} not wrapped"
            assert getattr(dist, name) is getattr(c10d, name)  # P2POp checks c10d's
    for name in wrapped:
        assert getattr(dist, name) is own[name] is getattr(c10d, name), f"{name} left wrapped"


def learners_ring(t: torch.Tensor) -> torch.Tensor:
    """A ring as a learner writes it from the tutorials: isend right, irecv left, wait."""
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = list(t.tensor_split(n))
    for step in range(2 * (n - 1)):
        send, into = chunks[(rank - step) % n], chunks[(rank - step - 1) % n]
        incoming = torch.empty_like(into)
        requests = [dist.isend(send, (rank + 1) % n), dist.irecv(incoming, (rank - 1) % n)]
        for request in requests:
            request.wait()
        into.add_(incoming) if step < n - 1 else into.copy_(incoming)
    return t


def learners_batched_ring(t: torch.Tensor) -> torch.Tensor:
    """The same ring with P2POp and batch_isend_irecv (as NCCL wants it)."""
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = list(t.tensor_split(n))
    for step in range(2 * (n - 1)):
        send, into = chunks[(rank - step) % n], chunks[(rank - step - 1) % n]
        incoming = torch.empty_like(into)
        ops = [dist.P2POp(dist.isend, send, (rank + 1) % n),
               dist.P2POp(dist.irecv, incoming, (rank - 1) % n)]  # fmt: skip
        for request in dist.batch_isend_irecv(ops):
            request.wait()
        into.add_(incoming) if step < n - 1 else into.copy_(incoming)
    return t


RINGS = {"isend/irecv": learners_ring, "P2POp": learners_batched_ring, "course": ring_allreduce}


def _counted_ring(name: str, numel: int) -> tuple:
    t = torch.full((numel,), float(dist.get_rank() + 1))
    with recorder.recording() as log:
        RINGS[name](t)
    return t, [(m.op, m.peer, m.nbytes) for m in log.messages]


@pytest.mark.parametrize("name", ["isend/irecv", "P2POp"])
def test_a_learners_ring_is_counted_exactly_at_the_boundary(name):
    n, numel = 3, 12
    for rank, (total, messages) in enumerate(launch(_counted_ring, n, args=(name, numel))):
        assert torch.equal(total, torch.full((numel,), 6.0))
        sent = [m for m in messages if m[0] == "isend"]
        received = [m for m in messages if m[0] == "irecv"]
        assert [peer for _, peer, _ in sent] == [(rank + 1) % n] * 2 * (n - 1)
        assert [peer for _, peer, _ in received] == [(rank - 1) % n] * 2 * (n - 1)
        assert sum(nbytes for *_, nbytes in sent) == 2 * (n - 1) * (numel // n) * 4


@pytest.mark.parametrize("name", ["isend/irecv", "P2POp"])
def test_05s_checker_accepts_a_learners_ring_written_either_way(name, capsys):
    assert check_ring(RINGS[name])
    assert "✓" in capsys.readouterr().out


def _simulated_ring(name: str) -> float:
    t = torch.ones(2500)  # 10 KB: 4 chunks of 2.5 KB, 23 ms each on the slow link
    with wire.active(SLOW, virtual=True):
        dist.barrier()
        start = wire.restart()
        RINGS[name](t)
        return wire.now() - start


def test_on_a_simulated_link_a_learners_ring_takes_the_course_rings_time():
    """Read from the simulator's clocks (CPU time and wire), not from a wall clock."""
    times = {name: max(launch(_simulated_ring, 4, args=(name,))) for name in RINGS}
    wire_seconds = 6 * (0.02 + 625 * 4 * 8 / 8e6)  # 2(N-1) steps of one chunk each
    for name, seconds in times.items():
        assert seconds >= wire_seconds, name
        assert seconds == pytest.approx(times["course"], rel=0.1), name


def _collectives() -> list:
    rank = dist.get_rank()
    x = torch.ones(8)
    with recorder.recording() as log:
        dist.all_reduce(x)
        out = torch.empty(4)
        dist.reduce_scatter_tensor(out, x)
        dist.all_gather_into_tensor(x, out)
        gathered = [None, None]
        dist.all_gather_object(gathered, {"rank": rank})
    return [(m.op, m.nbytes, m.group) for m in log.messages], gathered


def test_collectives_are_counted_as_the_ring_moves_them_and_each_call_once():
    (messages, gathered), _ = launch(_collectives, 2)
    assert messages[:3] == [
        ("all_reduce", 32, None),  # 2(N-1)/N of 32 bytes
        ("reduce_scatter_tensor", 16, None),  # (N-1)/N of the 32-byte input
        ("all_gather_into_tensor", 16, None),  # (N-1)/N of the 32-byte output
    ]
    assert all(op == "all_gather" for op, *_ in messages[3:])  # the object's tensors, once each
    assert gathered == [{"rank": 0}, {"rank": 1}]


def _sends_one(spec: str) -> None:
    with wire.active(spec):
        wire.restart()  # the simulator's own all-reduce: not the code's, never counted
        t = torch.ones(4)
        if dist.get_rank() == 0:
            dist.send(t, 1)
        else:
            dist.recv(t, 0)
    return t


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_launch_carries_the_recording_into_every_rank_and_merges_their_logs(method):
    with recorder.recording() as log:
        results = launch(_sends_one, 2, args=(SLOW,), start_method=method)
    assert [t.tolist() for t in results] == [[1.0] * 4] * 2
    assert [(m.op, m.rank, m.peer, m.nbytes) for m in log.messages] == [
        ("send", 0, 1, 16),
        ("recv", 1, 0, 16),
    ]


def _ddp_step_counted() -> tuple:
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 2))
    )
    model.register_comm_hook(None, allreduce_hook)  # DDP's own all-reduce, in Python
    with recorder.recording() as log:
        model(torch.ones(4, 8)).sum().backward()
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return [(m.op, m.nbytes) for m in log.messages], nbytes


def test_ddp_buckets_are_counted_through_a_comm_hook_that_calls_torch_distributed():
    """DDP's reducer all-reduces in C++, out of the recorder's sight; PyTorch's own
    allreduce_hook sends each bucket through dist.all_reduce, which the recorder counts."""
    for messages, nbytes in launch(_ddp_step_counted, 2):
        assert messages and all(op == "all_reduce" for op, _ in messages)
        assert sum(b for _, b in messages) == nbytes  # 2(N-1)/N of every gradient, N = 2


def _uneven_all_to_all() -> list:
    rank = dist.get_rank()
    splits = [1, 3] if rank == 0 else [2, 2]  # rows of 4 float32: 16 bytes each
    rows = torch.ones(4, 4)
    received = [1, 2] if rank == 0 else [3, 2]
    with recorder.recording() as log:
        dist.all_to_all_single(torch.empty(sum(received), 4), rows, received, splits)
    return [m.nbytes for m in log.messages]


def test_an_all_to_all_is_counted_as_the_rows_that_leave_the_rank():
    assert launch(_uneven_all_to_all, 2) == [[3 * 16], [2 * 16]]


class _Summing(torch.nn.Module):
    """A layer whose forward and backward each all-reduce, as Megatron's f and g do."""

    def forward(self, x):
        return _AllReduced.apply(_AllReduced.apply(x))


class _AllReduced(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


def _labelled_step() -> list:
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), _Summing())
    labels.label_modules({"summing": model[1]})
    x = torch.ones(1, 2, requires_grad=True)
    with recorder.recording() as log:
        y = model(x).sum()
        dist.all_reduce(torch.ones(1))
        y.backward()
        with labels.labelled("gradients", "backward"):
            dist.all_reduce(model[0].weight.grad)
    return [(m.where, m.direction) for m in log.messages]


def test_a_module_hooked_from_outside_labels_the_messages_of_its_forward_and_backward():
    for got in launch(_labelled_step, 2):
        assert got == [("summing", "forward")] * 2 + [(None, None)] + [
            ("summing", "backward")
        ] * 2 + [("gradients", "backward")]


def _all_reduce_on_slow_link(through_wire: bool) -> float:
    with wire.active(SLOW, virtual=True):
        dist.barrier()
        start = wire.restart()
        (wire.all_reduce if through_wire else dist.all_reduce)(torch.ones(2500))
        return wire.now() - start


@pytest.mark.parametrize("through_wire", [False, True])
def test_a_plain_all_reduce_pays_the_simulated_link_as_a_ring_once(through_wire):
    """Read from the simulator's clocks: 2(N-1) steps of a 5 KB chunk on the 20 ms link,
    25 ms each; a second charge would add as much again, far above the CPU's few ms."""
    wire_seconds = 2 * (0.02 + 1250 * 4 * 8 / 8e6)
    for seconds in launch(_all_reduce_on_slow_link, 2, args=(through_wire,)):
        assert wire_seconds <= seconds < 1.5 * wire_seconds
