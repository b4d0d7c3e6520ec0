"""The mesh-groups checker passes the reference solution and names each classic mistake; the
layout it checks against is checked against a real DeviceMesh in test_mesh3d."""

from __future__ import annotations

import pytest
import torch
from reference import load_solution

from course_utils.core.checks import NOT_SOLVED
from course_utils.mesh.mesh_exercises import check_mesh_groups

mesh_groups = load_solution("11_mesh.py").mesh_groups


def dims_reversed(world_size, shape, dims):
    return mesh_groups(world_size, shape, dims[::-1])


def column_major(world_size, shape, dims):
    layout = torch.arange(world_size).reshape(shape[::-1]).permute(*reversed(range(len(shape))))
    return {name: layout.movedim(d, -1).reshape(-1, shape[d]).tolist()
            for d, name in enumerate(dims)}  # fmt: skip


def hard_coded(world_size, shape, dims):
    return {"dp": [[0, 4], [1, 5], [2, 6], [3, 7]], "pp": [[0, 2], [1, 3], [4, 6], [5, 7]],
            "tp": [[0, 1], [2, 3], [4, 5], [6, 7]]}  # fmt: skip


def rank_twice(world_size, shape, dims):
    found = mesh_groups(world_size, shape, dims)
    found[dims[-1]][1][0] = 0
    return found


def stub(world_size, shape, dims):
    raise NotImplementedError


def test_the_reference_solution_passes():
    assert check_mesh_groups(mesh_groups).ok


@pytest.mark.parametrize(
    "answer, named",
    [
        (stub, NOT_SOLVED),
        (None, NOT_SOLVED),
        (dims_reversed, "dimensions in the wrong order"),
        (column_major, "column-major"),
        (hard_coded, "return a dict with one entry per dimension name ('dp', 'tp')"),
        (rank_twice, "rank 0 is in two groups of dimension 'tp'"),
        (lambda n, shape, dims: [list(range(n))], "return a dict"),
        (lambda n, shape, dims: {d: 1 / 0 for d in dims}, "raised ZeroDivisionError"),
        (lambda n, shape, dims: {d: [[r] for r in range(n)] for d in dims}, "should hold 2 ranks"),
    ],
)
def test_each_mistake_is_named(answer, named, capsys):
    assert not check_mesh_groups(answer).ok
    assert named in capsys.readouterr().out


def test_the_course_s_own_groups_are_refused(capsys):
    from course_utils.core.own_answers import message
    from course_utils.mesh.groups import mesh_groups

    assert not check_mesh_groups(lambda world_size, shape, dims: mesh_groups(shape, dims))
    assert not check_mesh_groups(mesh_groups)
    assert capsys.readouterr().out.count(message("mesh_groups")) == 2
