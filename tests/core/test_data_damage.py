"""A damaged cache is rebuilt, and a bad CIFAR-10 archive is named with what to do about it."""

from __future__ import annotations

import hashlib
import io
import tarfile

import numpy as np
import pytest

from course_utils.core import cifar, data
from course_utils.core.errors import DataError


def test_a_cache_of_the_wrong_size_with_a_matching_checksum_is_regenerated(tmp_path):
    data.mnist1d(num_samples=100, root=tmp_path)
    cache = next(tmp_path.glob("mnist1d_*.npz"))
    small = {
        k: np.zeros((4, 40) if k.startswith("x") else 4) for k in ("x", "y", "x_test", "y_test")
    }
    data._save_cached(cache, small)  # well formed, checksum matches, wrong size
    with pytest.warns(UserWarning, match="damaged"):
        again = data.mnist1d(num_samples=100, root=tmp_path)
    assert len(again.train) + len(again.test) == 100


def test_a_folder_in_place_of_the_cache_is_replaced_and_leaves_no_temp_files(tmp_path):
    (tmp_path / "mnist1d_n100_seed42.npz").mkdir()
    with pytest.warns(UserWarning, match="damaged"):
        d = data.mnist1d(num_samples=100, root=tmp_path)
    assert len(d.train) == 80
    assert not list(tmp_path.glob("*.tmp*"))


def _archive(root, members: dict[str, bytes]):
    root.mkdir(parents=True, exist_ok=True)
    with tarfile.open(root / data.CIFAR_ARCHIVE, "w:gz") as tar:
        for name, payload in members.items():
            info = tarfile.TarInfo(f"{data.CIFAR_FOLDER}/{name}")
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return root / data.CIFAR_ARCHIVE


def test_a_corrupt_archive_is_named_with_its_checksum_and_the_file_to_delete(tmp_path):
    archive = tmp_path / data.CIFAR_ARCHIVE
    archive.write_bytes(b"\x1f\x8b not really gzip")
    md5 = hashlib.md5(archive.read_bytes()).hexdigest()
    with pytest.raises(DataError, match=rf"{archive.name} is damaged: its MD5 is {md5}.*Delete"):
        data.cifar10(root=tmp_path, download=True)  # the real archive's checksum is known
    with pytest.raises(DataError, match="is not unpacked yet"):
        data.cifar10(root=tmp_path)  # never "not in data/" while the archive is there


def test_a_truncated_archive_is_one_message_not_a_tarfile_traceback(tmp_path):
    sums = {"test_batch": "0" * 32}
    archive = _archive(tmp_path, {"test_batch": b"x" * 5000})
    archive.write_bytes(archive.read_bytes()[:60])
    with pytest.raises(DataError, match="cannot be unpacked.*Delete"):
        data.cifar10(root=tmp_path, download=True, checksums=sums)
    assert not (tmp_path / data.CIFAR_FOLDER).exists()


def test_an_archive_with_bad_content_is_named_and_its_extraction_removed(tmp_path):
    sums = {"test_batch": "0" * 32}
    archive = _archive(tmp_path, {"test_batch": b"not the real batch"})
    with pytest.raises(DataError, match=rf"{archive.name} unpacked, but its files are not"):
        data.cifar10(root=tmp_path, download=True, checksums=sums)
    assert not (tmp_path / data.CIFAR_FOLDER).exists()
    assert cifar.status(tmp_path, sums) == "missing"


def test_the_cli_prints_a_data_error_as_one_message(tmp_path, monkeypatch, capsys):
    from course_utils import __main__ as cli

    monkeypatch.setattr(data, "DATA_DIR", tmp_path)
    (tmp_path / data.CIFAR_ARCHIVE).write_bytes(b"garbage")
    assert cli.main(["data", "cifar10"]) == 1
    err = capsys.readouterr().err
    assert "DataError" in err and "Delete" in err and "Traceback" not in err
