"""Checker for notebook 11's exercise: build the process groups of a device mesh by hand.

The learner writes `mesh_groups(world_size, shape, dims)`, returning for each dimension
name its list of rank groups, as `init_device_mesh(device, shape, mesh_dim_names=dims)`
forms them. The checker compares with the groups worked out from the row-major layout
(`groups.mesh_groups`, checked against a real `DeviceMesh` in the tests) on meshes of
several shapes, so an answer written for 2 x 2 x 2 alone fails, and names the classic
mistakes: dimensions swapped, a column-major layout, a rank in two groups of one
dimension. It prints one verdict line and never raises at the learner.
"""

from __future__ import annotations

import math

from ..core.own_answers import answer, first_problem_verdict
from .groups import mesh_groups as expected_groups
from .groups import ranks_of_groups

CASES = (  # not a cube first: on one, a column-major layout is the dimensions reversed
    ((2, 4), ("dp", "tp")),
    ((3, 2, 2), ("dp", "pp", "tp")),
    ((2, 2, 2), ("dp", "pp", "tp")),
    ((2, 2, 2), ("pp", "dp", "tp")),
)


def _as_groups(value) -> list[list[int]] | None:
    try:
        return [[int(r) for r in g] for g in value]
    except (TypeError, ValueError):
        return None


def _partition_problem(name: str, groups: list[list[int]], world: int, size: int) -> str | None:
    seen: dict[int, int] = {}
    for i, group in enumerate(groups):
        for r in group:
            if not 0 <= r < world:
                return f"the {name!r} groups name rank {r}, outside 0..{world - 1}"
            if r in seen:
                where = "twice in one group" if seen[r] == i else "in two groups"
                return (
                    f"rank {r} is {where} of dimension {name!r}: the groups of one dimension "
                    f"split the ranks, each rank in exactly one"
                )
            seen[r] = i
    missing = sorted(set(range(world)) - set(seen))
    if missing:
        return f"rank {missing[0]} is in no group of dimension {name!r}"
    if any(len(g) != size for g in groups):
        return f"each {name!r} group should hold {size} ranks (that dimension's size)"
    return None


def _problem(mesh_groups, shape, dims):
    """The first thing wrong with the learner's groups for this mesh, or None."""
    world = math.prod(shape)
    found = answer(mesh_groups, world, tuple(shape), tuple(dims))
    mesh = f"shape {tuple(shape)}, dims {tuple(dims)}"
    if not isinstance(found, dict) or set(found) != set(dims):
        keys = sorted(found) if isinstance(found, dict) else type(found).__name__
        return f"{mesh}: return a dict with one entry per dimension name {tuple(dims)}; got {keys}"
    want = {d: ranks_of_groups(g) for d, g in expected_groups(shape, dims).items()}
    # a column-major layout (the first dimension varying fastest: Fortran order, not
    # DeviceMesh's) is the row-major one of the dimensions in reverse
    column_major = expected_groups(shape[::-1], dims[::-1])
    transposed = {d: ranks_of_groups(g) for d, g in column_major.items()}
    for d, name in enumerate(dims):
        groups = _as_groups(found[name])
        if groups is None:
            return f"{mesh}: the {name!r} entry should be a list of groups, each a list of ranks"
        mine = ranks_of_groups(groups)
        if mine == want[name]:
            continue
        other = next((o for o in dims if o != name and want[o] == mine), None)
        if other:
            return (
                f"{mesh}: your {name!r} groups are the {other!r} groups: dimensions in the "
                f"wrong order (the layout is row-major, the last name, {dims[-1]!r}, varies "
                f"fastest)"
            )
        if mine == transposed[name]:
            return (
                f"{mesh}: your {name!r} groups are those of a column-major layout (the first "
                f"dimension varying fastest); DeviceMesh is row-major: the last varies fastest"
            )
        partition = _partition_problem(name, groups, world, shape[d])
        if partition:
            return f"{mesh}: {partition}"
        return f"{mesh}: the {name!r} groups should be {want[name]}; yours are {mine}"
    return None


def check_mesh_groups(mesh_groups, cases=CASES) -> bool:
    """`mesh_groups(world_size, shape, dims)` -> {dimension name: [[rank, ...], ...]}."""
    return first_problem_verdict(
        mesh_groups,
        "mesh_groups",
        lambda shape, dims: _problem(mesh_groups, shape, dims),
        cases,
        f"your groups equal DeviceMesh's on all {len(cases)} meshes tried",
    )
