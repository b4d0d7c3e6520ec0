"""Each 3D-mesh verdict passes on what a run measures and fails where its effect is absent."""

from __future__ import annotations

from course_utils.core.sizes_model_parallel import MeshSizes
from course_utils.mesh import groups, mesh_runs
from course_utils.mesh import mesh_verdicts as v

FORMULA = mesh_runs.bytes_formula(MeshSizes())


def test_equality_verdict_fails_above_its_tolerance_or_without_ranks():
    assert v.mesh_equals_one_process({r: 2e-8 for r in range(8)}).ok
    assert not v.mesh_equals_one_process({**{r: 2e-8 for r in range(8)}, 3: 2e-5}).ok
    assert not v.mesh_equals_one_process({0: float("inf")}).ok
    assert not v.mesh_equals_one_process({}).ok


def test_the_formula_by_hand_for_the_default_mesh():
    micro = 8 // 2 // 2 * 8 * 16 * 4  # (B/D/M) s w fp32 = 1024 bytes
    first = 4 * 16 + (4 * 16 * 16 + 3 * 16 + 2 * 64 * 16 + 64) // 2 + 2 * 16 + (16 + 8) * 16
    last = first - (16 + 8) * 16 + 2 * 16 + 16 * 16
    assert FORMULA[0] == {"dp": 4 * first, "pp": 2 * micro, "tp": 2 * 4 * micro}
    assert FORMULA[7] == {"dp": 4 * last, "pp": 2 * micro, "tp": 2 * 4 * micro}


def test_bytes_verdict_is_exact_and_fails_on_one_byte_or_a_missing_dimension():
    assert v.mesh_bytes_match_formula(FORMULA, FORMULA).ok
    one_byte = {**FORMULA, 2: {**FORMULA[2], "tp": FORMULA[2]["tp"] + 1}}
    assert not v.mesh_bytes_match_formula(one_byte, FORMULA).ok
    no_dp_sync = {r: {**b, "dp": 0} for r, b in FORMULA.items()}
    assert not v.mesh_bytes_match_formula(no_dp_sync, FORMULA).ok
    assert not v.mesh_bytes_match_formula({r: FORMULA[r] for r in range(7)}, FORMULA).ok
    assert not v.mesh_bytes_match_formula({}, {}).ok


def test_groups_verdict_fails_on_swapped_dimensions():
    expected = groups.mesh_groups((2, 2, 2), ("dp", "pp", "tp"))
    assert v.mesh_groups_match(expected, expected).ok
    swapped = {**expected, "dp": expected["tp"], "tp": expected["dp"]}
    assert not v.mesh_groups_match(swapped, expected).ok
