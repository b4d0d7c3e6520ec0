"""Notebook 11's claims about the 3D mesh, as verdicts.

Each compares what the run measured (`mesh_runs.run_mesh`) with a stated threshold or a
formula; the numbers go on the line before, the verdict line carries none.
"""

from __future__ import annotations

from ..core.checks import Verdict, verdict
from .groups import ranks_of_groups


def mesh_equals_one_process(diffs: dict, tolerance: float = 1e-5) -> Verdict:
    """`diffs`: per rank, the largest |shard - one process's same slice| (`MeshRun.diffs`)."""
    return verdict(
        bool(diffs) and all(d <= tolerance for d in diffs.values()),
        f"after the same SGD steps every rank's shard equals its slice of one process "
        f"(fp32, within {tolerance:g})",
    )


def mesh_bytes_match_formula(measured: dict, formula: dict) -> Verdict:
    """`measured`, `formula`: per rank, {dimension: bytes sent per step}. Exact, byte for
    byte, on every rank and every dimension (a missing rank or dimension fails)."""
    return verdict(
        bool(formula) and measured == formula,
        "every rank sends exactly the formula's bytes per step over dp, pp and tp",
    )


def mesh_groups_match(built: dict, expected: dict) -> Verdict:
    """`built`: per dimension, the groups `init_device_mesh` made (`MeshRun.groups`);
    `expected`: those worked out from the layout (`groups.mesh_groups`)."""

    def norm(groups):
        return {d: ranks_of_groups(gs) for d, gs in groups.items()}

    return verdict(
        bool(expected) and norm(built) == norm(expected),
        "DeviceMesh's groups are the lines of the rank layout along each dimension",
    )
