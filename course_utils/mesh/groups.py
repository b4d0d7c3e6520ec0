"""Which ranks talk to which on a device mesh, worked out without starting a process.

A mesh lays the ranks 0..N-1 out in row-major order over its shape: on a (dp, pp, tp) =
(2, 2, 2) mesh rank 5 sits at (1, 0, 1), and the last dimension varies fastest. A
dimension's groups are the lines of the mesh along that dimension: every other coordinate
fixed. `init_device_mesh` builds exactly these (one process group per line), so the
course can draw them and check a learner's by hand from the same arithmetic.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..core.own_answers import own_answer


@own_answer("mesh_groups")
def mesh_groups(shape, dims) -> dict[str, list[list[int]]]:
    """For each dimension name, its groups of ranks (each in ascending order), as
    `init_device_mesh(..., shape, mesh_dim_names=dims)` forms them."""
    if len(shape) != len(dims):
        raise ValueError(f"shape {tuple(shape)} has {len(shape)} sizes but {len(dims)} names.")
    if len(set(dims)) != len(dims):
        raise ValueError(f"dimension names must differ, got {tuple(dims)}.")
    layout = torch.arange(math.prod(shape)).reshape(tuple(shape))  # cpu: pure arithmetic
    return {
        name: layout.movedim(d, -1).reshape(-1, shape[d]).tolist() for d, name in enumerate(dims)
    }


def coords_of(rank: int, shape) -> tuple[int, ...]:
    """Rank's coordinates on the mesh, in the order of `shape` (the last varies fastest)."""
    return tuple(int(c) for c in np.unravel_index(rank, tuple(shape)))


def ranks_of_groups(groups) -> list[list[int]]:
    """Groups as sorted lists, in sorted order: two layouts of the same groups compare equal."""
    return sorted(sorted(int(r) for r in g) for g in groups)
