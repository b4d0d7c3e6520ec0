"""The gpu profile's CIFAR-10 path, end to end, on the CPU over gloo: no GPU, no network.

The archive is generated in CIFAR-10's own format (tests/cifar_archive.py) and checked
against its own checksums; everything else is what `COURSE_PROFILE=gpu` runs: its
dataset, the report's CNN, its batch and learning rate, on forked gloo ranks.
"""

from __future__ import annotations

import pytest
from cifar_archive import write_fake_cifar

from course_utils.core import cifar, data, profiles
from course_utils.ddp.equivalence import Setup, equivalence
from course_utils.ddp.experiments import compare_with_single


@pytest.fixture
def gpu_sized_setup(tmp_path, monkeypatch):
    checksums = write_fake_cifar(tmp_path, n_per_batch=16)
    monkeypatch.setattr(data, "DATA_DIR", tmp_path)  # forked ranks inherit both
    monkeypatch.setattr(cifar, "checksums", lambda: checksums)
    P = profiles.PROFILES["gpu"]
    S = P.ddp
    return Setup(
        dataset=P.dataset, model=P.model, hidden=S.hidden, per_rank_batch=S.per_rank_batch,
        lr=S.lr, steps=3,
    )  # fmt: skip


def test_the_gpu_profile_trains_the_reports_cnn_on_cifar10(gpu_sized_setup):
    assert (gpu_sized_setup.dataset, gpu_sized_setup.model) == ("cifar10", "report_cnn")
    result = equivalence(2, "ddp", gpu_sized_setup, backend="gloo", timeout=120)
    assert result.ranks_identical and result.max_abs_diff < 1e-5
    assert len(result.single_losses) == 3


def test_the_gpu_profiles_ddp_comparison_runs_an_epoch(gpu_sized_setup):
    comparison = compare_with_single(2, gpu_sized_setup, 1, backend="gloo")
    ddp = comparison.ddp
    assert (
        ddp.epochs == 1 and ddp.steps == (64 // 2) // gpu_sized_setup.per_rank_batch
    )  # 80/20 split of 80
    assert 0.0 <= ddp.test_acc <= 1.0 and len(ddp.epoch_val_loss) == 1
