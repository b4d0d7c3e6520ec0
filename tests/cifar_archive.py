"""A tiny CIFAR-10 in the dataset's exact on-disk format, for tests that must run offline.

The files are what the real archive unpacks to (`cifar-10-batches-py/data_batch_1..5` and
`test_batch`, each a pickled dict of uint8 rows and labels); only their size differs.
"""

from __future__ import annotations

import hashlib
import pickle

import numpy as np

from course_utils.core import data


def write_fake_cifar(root, n_per_batch: int = 6) -> dict[str, str]:
    """Write the batch files under `root` and return their MD5s, as the checksums to expect."""
    folder = root / data.CIFAR_FOLDER
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for name in names:
        batch = {
            "data": rng.integers(0, 256, size=(n_per_batch, 3072), dtype=np.uint8),
            "labels": rng.integers(0, 10, size=n_per_batch).tolist(),
        }
        (folder / name).write_bytes(pickle.dumps(batch))
    return {name: hashlib.md5((folder / name).read_bytes()).hexdigest() for name in names}
