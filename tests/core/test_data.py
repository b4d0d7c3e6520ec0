"""Data is offline by default, cached with a checksum, and CIFAR-10 is checked file by file."""

from __future__ import annotations

import tarfile
import urllib.error
from pathlib import Path

import pytest
import torch
from cifar_archive import write_fake_cifar

from course_utils.core import data
from course_utils.core.errors import DataError


def test_mnist1d_is_generated_then_cached(tmp_path, monkeypatch):
    first = data.mnist1d(num_samples=200, root=tmp_path)
    assert (len(first.train), len(first.test)) == (160, 40)
    x = first.train.tensors[0]
    assert x.shape == (160, 40) and x.dtype == torch.float32
    assert set(first.train.tensors[1].tolist()) <= set(range(10))

    def must_not_generate(*a, **k):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(data, "_generate_mnist1d", must_not_generate)
    second = data.mnist1d(num_samples=200, root=tmp_path)
    assert torch.equal(first.train.tensors[0], second.train.tensors[0])


def test_a_damaged_cache_is_detected_and_rebuilt(tmp_path):
    good = data.mnist1d(num_samples=100, root=tmp_path)
    cache = next(tmp_path.glob("mnist1d_*.npz"))
    cache.write_bytes(cache.read_bytes()[:200])  # truncated
    with pytest.warns(UserWarning, match="damaged"):
        rebuilt = data.mnist1d(num_samples=100, root=tmp_path)
    assert torch.equal(good.test.tensors[0], rebuilt.test.tensors[0])
    assert data._load_cached(cache) is not None  # and the new cache is sound


def test_mnist1d_refuses_a_bad_size(tmp_path):
    with pytest.raises(ValueError, match="multiple of 10"):
        data.mnist1d(num_samples=15, root=tmp_path)


def test_cifar10_loads_a_checked_copy(tmp_path):
    sums = write_fake_cifar(tmp_path)
    d = data.cifar10(root=tmp_path, checksums=sums)
    assert (len(d.train), len(d.test)) == (30, 6)
    assert d.train.tensors[0].shape == (30, 3, 32, 32) and d.input_shape == (3, 32, 32)
    assert data.cifar10_status(tmp_path, sums) == "ok"


def test_cifar10_corrupt_file_is_named(tmp_path):
    sums = write_fake_cifar(tmp_path)
    (tmp_path / data.CIFAR_FOLDER / "data_batch_3").write_bytes(b"garbage")
    with pytest.raises(DataError, match="damaged.*data_batch_3.*Delete that folder"):
        data.cifar10(root=tmp_path, checksums=sums)


def test_cifar10_missing_says_how_to_get_it(tmp_path):
    with pytest.raises(DataError, match="python -m course_utils data cifar10"):
        data.cifar10(root=tmp_path)


def test_cifar10_download_without_network_is_a_clear_error(tmp_path, monkeypatch):
    import torchvision.datasets

    class Offline(torchvision.datasets.CIFAR10):
        def __init__(self, *args, **kwargs):
            raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", Offline)
    with pytest.raises(DataError, match="could not download CIFAR-10.*Without a network"):
        data.cifar10(root=tmp_path, download=True)


def test_cifar10_archive_copied_by_hand_is_unpacked(tmp_path):
    staging = tmp_path / "staging"
    sums = write_fake_cifar(staging)
    root = tmp_path / "root"
    root.mkdir()
    with tarfile.open(root / data.CIFAR_ARCHIVE, "w:gz") as tar:
        tar.add(staging / data.CIFAR_FOLDER, arcname=data.CIFAR_FOLDER)
    d = data.cifar10(root=root, download=True, checksums=sums)
    assert len(d.test) == 6


def test_the_official_checksums_come_from_torchvision():
    sums = data.cifar10_checksums()
    assert set(sums) == {f"data_batch_{i}" for i in range(1, 6)} | {"test_batch"}


def test_load_by_name(tmp_path):
    assert data.load("mnist1d", root=tmp_path, num_samples=100).name == "mnist1d"
    with pytest.raises(ValueError, match="unknown dataset"):
        data.load("imagenet")


def test_train_val_split_is_80_20_and_seeded(tmp_path):
    d = data.mnist1d(num_samples=100, root=tmp_path)
    a_train, a_val = data.train_val_split(d.train, 0.2, seed=1)
    b_train, _ = data.train_val_split(d.train, 0.2, seed=1)
    assert (len(a_train), len(a_val)) == (64, 16)
    assert a_train.indices == b_train.indices
    with pytest.raises(ValueError, match="between 0 and 1"):
        data.train_val_split(d.train, 1.5)


def test_first_samples_takes_what_there_is():
    ds = torch.utils.data.TensorDataset(torch.arange(10).float())
    assert [int(x) for (x,) in data.first_samples(ds, 4)] == [0, 1, 2, 3]
    assert data.first_samples(ds, 10_000) is ds  # a small stand-in set, not an IndexError
    assert data.first_samples(ds, None) is ds


def test_shards_are_disjoint_and_cover_the_data():
    ds = torch.utils.data.TensorDataset(torch.arange(40).float(), torch.arange(40))
    seen = []
    for r in range(4):
        loader = data.shard_loader(ds, batch_size=5, rank=r, world_size=4, shuffle=True, seed=3)
        seen.append([int(y) for _, ys in loader for y in ys])
    assert all(len(s) == 10 for s in seen)
    assert sorted(sum(seen, [])) == list(range(40))
    with pytest.raises(ValueError, match="batch_size"):
        data.shard_loader(ds, batch_size=0, rank=0, world_size=1)


def test_status_reports_both_datasets(tmp_path):
    s = data.status(tmp_path)
    assert s["cifar10"] == "missing" and "not generated" in s["mnist1d"]


def test_the_default_data_folder_is_the_repositorys_data():
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "COURSE_DATA"}
    code = "from course_utils.core import data; print(data.DATA_DIR)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    repository = Path(__file__).resolve().parents[2]
    assert Path(out.stdout.strip()) == repository / "data", out.stderr
