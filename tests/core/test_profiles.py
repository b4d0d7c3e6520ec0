"""One switch chooses the profile; a wrong name says which ones exist."""

from __future__ import annotations

import pytest

from course_utils.core import profiles
from course_utils.core.errors import ProfileError
from course_utils.core.gpus import GpuCount


def _gpus(monkeypatch, n: int) -> None:
    monkeypatch.setattr(profiles, "visible_gpus", lambda: GpuCount(n, "a test"))


@pytest.mark.parametrize("gpus, expected", [(0, "cpu"), (1, "cpu"), (2, "gpu"), (8, "gpu")])
def test_default_is_gpu_only_with_two_gpus_or_more(monkeypatch, gpus, expected):
    monkeypatch.delenv(profiles.ENV_VAR, raising=False)
    _gpus(monkeypatch, gpus)
    assert profiles.current().name == expected


def test_environment_variable_chooses(monkeypatch):
    _gpus(monkeypatch, 0)
    monkeypatch.setenv(profiles.ENV_VAR, "CPU")
    assert profiles.current().name == "cpu"


def test_unknown_name_lists_the_valid_ones(monkeypatch):
    monkeypatch.setenv(profiles.ENV_VAR, "laptop")
    with pytest.raises(ProfileError, match=r"unknown profile 'laptop'.*valid profiles: cpu, gpu"):
        profiles.current()


def test_gpu_profile_without_a_gpu_is_refused(monkeypatch):
    _gpus(monkeypatch, 0)
    with pytest.raises(ProfileError, match="COURSE_PROFILE=cpu"):
        profiles.get("gpu")


def test_gpu_profile_gives_each_rank_a_gpu(monkeypatch):
    _gpus(monkeypatch, 2)
    p = profiles.get("gpu")
    assert (p.backend, p.world_size, p.dataset) == ("nccl", 2, "cifar10")


def test_cpu_profile_runs_everything_on_gloo_with_generated_data():
    p = profiles.get("cpu")
    assert (p.backend, p.dataset) == ("gloo", "mnist1d")
    assert p.world_size >= 2


def test_a_notebooks_own_device_comes_from_the_profile_not_from_cuda(monkeypatch):
    """Asking torch.cuda.is_available() in the kernel starts CUDA's driver behind torch's
    back; the profile knows already (the gpu one exists only where NVML counted GPUs)."""
    import torch

    asked = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: asked.append(1) or True)
    _gpus(monkeypatch, 2)
    assert profiles.get("cpu").device == "cpu"
    assert profiles.get("gpu").device == "cuda"
    assert asked == []


def test_notebook_10_s_rank_counts_are_cut_to_the_gpus():
    fitted = profiles.fit_to_gpus(profiles.get("cpu"), 2)
    assert fitted.transformer.world_sizes == (2,)
    assert profiles.fit_to_gpus(profiles.get("cpu"), 1).transformer.world_sizes == (1,)
