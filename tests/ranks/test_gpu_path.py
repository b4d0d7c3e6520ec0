"""The GPU path, checked on any machine: start methods, clamps, CUDA failures, fork safety.

Where a GPU is present the NCCL tests run for real; on a CPU machine they are the
failure paths (a refused backend, a CUDA error named by rank) and the parts that need no
GPU (what the kernel does before it forks).
"""

from __future__ import annotations

import collections
import dataclasses
import subprocess
import sys
import typing

import pytest
import torch
import torch.distributed as dist

from course_utils.core import profiles
from course_utils.core.errors import BackendError, LaunchError
from course_utils.core.gpus import GpuCount, visible_gpus
from course_utils.ranks import bootstrap, processes, start_method
from course_utils.ranks.examples import cuda_all_reduce
from course_utils.ranks.launch import launch
from course_utils.ranks.local_nodes import TorchrunJob, torchrun_command

GPUS = visible_gpus().count
needs_gpu = pytest.mark.skipif(GPUS == 0, reason="no GPU here: the CPU tests cover the rest")


def test_nccl_ranks_are_spawned_and_gloo_ranks_forked_where_no_gpu_is():
    assert start_method.default_start_method("nccl") == "spawn"
    assert start_method.default_start_method("gloo") == ("forkserver" if GPUS else "fork")
    assert processes.context(None, "nccl").get_start_method() == "spawn"


KERNEL_SESSION = """
import torch.distributed as dist
from course_utils import launch, profiles
from course_utils.course import doctor
profiles.current()
facts, problems = doctor.report()
assert launch(dist.get_rank, 2, backend="gloo") == [0, 1]
now = doctor.forked_child_in_bad_fork()
print("bad fork:", now, "doctor says:", facts["forked_child_in_bad_fork"])
"""


def test_a_kernel_that_imports_chooses_a_profile_runs_doctor_and_launches_can_still_fork():
    out = subprocess.run(
        [sys.executable, "-c", KERNEL_SESSION], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "bad fork: False doctor says: False" in out.stdout


@pytest.mark.parametrize("gpus", [1, 2, 3, 4, 8])
def test_every_rank_count_of_the_gpu_profile_fits_the_gpus(gpus):
    p = profiles.fit_to_gpus(profiles.PROFILES["gpu"], gpus)
    counts = [p.world_size, p.ddp.scaling_world_size, p.ddp.overhead_world_size]
    assert all(1 <= n <= gpus for n in counts)
    assert p.world_size == min(gpus, profiles.PROFILES["gpu"].world_size)
    # 04's two-rank demonstrations and its sweeps over rank counts: NCCL within the GPUs,
    # else gloo ranks on the CPU, so that one GPU still sweeps more than 1 rank
    assert p.backend_for_ranks(2) == ("nccl" if gpus >= 2 else "gloo")
    sweep = p.ddp.split_world_sizes + p.ddp.strong_world_sizes
    if p.backend_for_ranks(max(sweep)) == "nccl":
        assert max(sweep) <= gpus
    else:
        assert gpus == 1 and max(sweep) == 8


def test_the_gpu_profile_is_fitted_when_chosen(monkeypatch):
    monkeypatch.setattr(profiles, "visible_gpus", lambda: GpuCount(1, "a test"))
    p = profiles.get("gpu")
    assert (p.world_size, p.ddp.scaling_world_size, p.ddp.overhead_world_size) == (1, 1, 1)


@pytest.mark.parametrize("gpus, world_size", [(0, 1), (1, 2), (2, 4)])
def test_nccl_beyond_the_gpus_is_refused_before_anything_starts(monkeypatch, gpus, world_size):
    monkeypatch.setattr(bootstrap, "visible_gpus", lambda: GpuCount(gpus, "a test"))
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    with pytest.raises(BackendError, match="Use backend='gloo'"):
        launch(dist.get_rank, world_size, backend="nccl")


@pytest.mark.skipif(GPUS > 0, reason="the GPU would work: test_one_nccl_rank runs instead")
def test_a_cuda_failure_while_a_rank_sets_up_names_the_rank(monkeypatch):
    """Told there is a GPU where there is none, rank 0 fails in torch.cuda.set_device."""
    monkeypatch.setattr(bootstrap, "visible_gpus", lambda: GpuCount(1, "a test"))
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    with pytest.raises(LaunchError, match=r"rank 0 of 1 raised \w+") as caught:
        launch(dist.get_rank, 1, backend="nccl", timeout=60)
    assert caught.value.rank == 0 and caught.value.remote_traceback
    assert "set_device" in caught.value.remote_traceback


@needs_gpu
def test_one_nccl_rank_all_reduces_on_its_gpu():
    (result,) = launch(cuda_all_reduce, 1, backend="nccl", timeout=300)
    assert result["value"] == 1.0 and result["device"] == "cuda:0"


def test_a_torchrun_script_is_told_the_backend_even_with_its_own_arguments():
    where = dict(node_rank=0, master_addr="127.0.0.1")
    cmd = torchrun_command(TorchrunJob(None, 2, 1, "m", ("--epochs", "1"), "gloo"), **where)
    assert cmd[-3:] == ["--epochs", "1", "--backend=gloo"]
    mine = torchrun_command(TorchrunJob(None, 2, 1, "m", ("--backend=nccl",)), **where)
    assert mine.count("--backend=nccl") == 1 and not any("=auto" in a for a in mine)


class _OnFakeDevice(torch.Tensor):
    """A tensor that claims to live on a device: only `.cpu()` turns it into a plain one."""

    def cpu(self, *args, **kwargs):
        return torch.Tensor(self.as_subclass(torch.Tensor).clone())


@dataclasses.dataclass
class _Trace:
    rounds: list
    bytes_sent: torch.Tensor
    derived: torch.Tensor = dataclasses.field(init=False)

    def __post_init__(self):
        self.derived = self.bytes_sent * 2


@dataclasses.dataclass(slots=True)
class _Slotted:
    value: torch.Tensor


class _Pair(typing.NamedTuple):
    left: torch.Tensor
    right: dict


def _leaves(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from _leaves(v)
    elif dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from _leaves(getattr(value, f.name))


def test_results_come_home_on_the_cpu_whatever_holds_them():
    from course_utils.ranks.child import _to_cpu

    def fake(*values):
        return torch.tensor(values, dtype=torch.float32).as_subclass(_OnFakeDevice)

    result = {
        "trace": _Trace([fake(1.0), (fake(2.0),)], fake(3.0)),
        "slotted": _Slotted(fake(4.0)),
        "pair": _Pair(fake(5.0), collections.OrderedDict(x=fake(6.0))),
        "plain": [fake(7.0), {"deep": {fake(8.0)}}],
        "untouched": "text",
    }
    home = _to_cpu(result)
    leaves = list(_leaves(home))
    assert len(leaves) == 9 and all(type(t) is torch.Tensor for t in leaves)
    assert isinstance(home["trace"], _Trace) and home["trace"].derived.tolist() == [6.0]
    assert isinstance(home["pair"], _Pair) and isinstance(
        home["pair"].right, collections.OrderedDict
    )
    assert home["untouched"] == "text" and type(result["slotted"].value) is _OnFakeDevice
