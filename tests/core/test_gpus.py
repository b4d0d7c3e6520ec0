"""GPUs are counted without waking CUDA, so a notebook kernel can still fork its ranks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from course_utils.core import gpus


@pytest.mark.parametrize(
    "listed, expected",
    [("0,1,2", 3), ("", 0), ("1", 1), ("0,-1,2", 1), ("GPU-aaaa,GPU-bbbb", 2), (" 0 , 1 ", 2)],
)
def test_cuda_visible_devices_is_read_as_cuda_reads_it(listed, expected):
    assert gpus.visible_entries(listed) == expected


def test_the_visible_list_cannot_add_gpus_the_driver_lacks(monkeypatch):
    monkeypatch.setattr(gpus.torch.version, "cuda", "13.0")
    monkeypatch.setattr(gpus, "nvml_device_count", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    assert gpus.visible_gpus() == gpus.GpuCount(2, "NVML and CUDA_VISIBLE_DEVICES")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpus.visible_gpus().count == 2


def test_no_driver_means_no_gpu(monkeypatch):
    monkeypatch.setattr(gpus.torch.version, "cuda", "13.0")
    monkeypatch.setattr(gpus, "NVML_LIBRARIES", ("libnvidia-ml-that-is-not-there.so",))
    assert gpus.nvml_device_count() is None
    assert gpus.visible_gpus() == gpus.GpuCount(0, "NVML not found (no NVIDIA driver)")


def test_a_cpu_build_of_torch_has_no_gpu(monkeypatch):
    monkeypatch.setattr(gpus.torch.version, "cuda", None)
    assert gpus.visible_gpus().count == 0


CHILD_STATE = """
import torch
from course_utils import profiles
from course_utils.course.doctor import forked_child_in_bad_fork
{setup}
print("bad fork:", forked_child_in_bad_fork())
"""


def _forked_child_is_in_bad_fork(setup: str) -> bool:
    code = CHILD_STATE.format(setup=setup)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return "bad fork: True" in out.stdout


def test_choosing_a_profile_leaves_fork_safe():
    assert not _forked_child_is_in_bad_fork("profiles.current(); profiles.get('cpu')")


def test_the_fork_check_can_fail():
    """The same check (doctor's) does see a kernel that asked the CUDA runtime itself."""
    assert _forked_child_is_in_bad_fork("torch.cuda.is_available()")
