"""CIFAR-10 on disk: fetched or unpacked only when asked, every file checked, errors that lead
somewhere.

torchvision downloads the archive into `data/`, or the learner copies it there by hand
(offline). Each batch file is checked against its published MD5. An archive that is
truncated, not a tar file, or holds the wrong files is named with its checksum against
the expected one, and what it extracted is removed, so that the learner is never sent to
re-extract the same bad archive.
"""

from __future__ import annotations

import hashlib
import pickle
import shutil
import tarfile
import zlib
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import TensorDataset

from .errors import DataError

FOLDER = "cifar-10-batches-py"
ARCHIVE = "cifar-10-python.tar.gz"
URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)
GET_IT = "`python -m course_utils data cifar10`"


def checksums() -> dict[str, str]:
    """Published MD5 of every CIFAR-10 batch file, as torchvision records them."""
    from torchvision.datasets import CIFAR10

    return dict(CIFAR10.train_list + CIFAR10.test_list)


def archive_checksum() -> str:
    """Published MD5 of the archive itself."""
    from torchvision.datasets import CIFAR10

    return CIFAR10.tgz_md5


def status(root: Path, sums: dict[str, str] | None = None) -> str:
    """'ok', 'missing', or 'corrupt: <files>' for the CIFAR-10 copy under `root`."""
    folder = root / FOLDER
    sums = sums or checksums()
    if not folder.exists():
        return "missing"
    bad = [name for name, md5 in sums.items() if md5sum(folder / name) != md5]
    return "ok" if not bad else "corrupt: " + ", ".join(bad)


def md5sum(path: Path) -> str | None:
    if not path.is_file():
        return None
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "md5").hexdigest()


def load(root: Path, download: bool, sums: dict[str, str] | None) -> tuple:
    """(train, test) as normalized tensors, after unpacking or downloading when asked."""
    state = status(root, sums)
    archive = root / ARCHIVE
    if state != "ok" and download:
        if archive.exists():
            _unpack(archive, root, sums)
        else:
            _download(root)
        state = status(root, sums)
    if state == "missing" and archive.exists():
        raise DataError(
            f"CIFAR-10 is not unpacked yet: {archive} is there. Run {GET_IT} to check and "
            "unpack it (offline)."
        )
    if state == "missing":
        raise DataError(
            f"CIFAR-10 is not in {root / FOLDER}. Download it with {GET_IT} (needs the "
            f"internet, 163 MB), or copy {ARCHIVE} from {URL} into {root} and run that "
            "command offline."
        )
    if state != "ok":
        raise DataError(
            f"CIFAR-10 in {root / FOLDER} is damaged ({state}). Delete that folder"
            + (f" and {archive}" if archive.exists() else "")
            + f", then run {GET_IT} to fetch it again."
        )
    folder = root / FOLDER
    return _batches(folder, [f"data_batch_{i}" for i in range(1, 6)]), _batches(
        folder, ["test_batch"]
    )


def _unpack(archive: Path, root: Path, sums: dict[str, str] | None) -> None:
    """Unpack an archive copied by hand, refusing one that is not the published archive."""
    found = md5sum(archive)
    expected = archive_checksum() if sums is None else None  # known for the real one only
    delete = f"Delete {archive} and copy a good one from {URL}, or run {GET_IT} online."
    if expected and found != expected:
        raise DataError(
            f"{archive} is damaged: its MD5 is {found}, the published archive's is "
            f"{expected} (an interrupted copy or download?). {delete}"
        )
    shutil.rmtree(root / FOLDER, ignore_errors=True)
    try:
        with tarfile.open(archive) as tar:
            try:
                tar.extractall(root, filter="data")
            except TypeError:  # Python without extraction filters
                tar.extractall(root)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        shutil.rmtree(root / FOLDER, ignore_errors=True)
        raise DataError(
            f"{archive} cannot be unpacked ({type(exc).__name__}: {exc}; MD5 {found}). {delete}"
        ) from exc
    state = status(root, sums)
    if state != "ok":
        shutil.rmtree(root / FOLDER, ignore_errors=True)
        raise DataError(
            f"{archive} unpacked, but its files are not CIFAR-10's ({state}; archive MD5 "
            f"{found}). What it unpacked was removed. {delete}"
        )


def _download(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    from torchvision.datasets import CIFAR10

    try:
        CIFAR10(str(root), train=True, download=True)
    except Exception as exc:  # URLError, socket errors, HTTP errors
        raise DataError(
            f"could not download CIFAR-10 ({type(exc).__name__}: {exc}). Without a network, "
            f"copy {ARCHIVE} from {URL} into {root} and run {GET_IT} again."
        ) from exc


def _batches(folder: Path, names: list[str]) -> TensorDataset:
    xs, ys = [], []
    for name in names:
        with open(folder / name, "rb") as f:
            batch = pickle.load(f, encoding="latin1")
        xs.append(np.asarray(batch["data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        ys.append(np.asarray(batch["labels"], dtype=np.int64))
    x = torch.from_numpy(np.concatenate(xs)).float().div_(255)
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    return TensorDataset((x - mean) / std, torch.from_numpy(np.concatenate(ys)))
