"""The 3D mesh (DP x PP x TP = 2 x 2 x 2 on 8 gloo ranks) against one process, in one launch:
every shard equals its slice of the one-process model, every rank's bytes per dimension equal
the formula, and DeviceMesh's groups equal the ones worked out from the layout."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from course_utils.core.sizes_model_parallel import MeshSizes
from course_utils.mesh import groups, mesh_charts, mesh_runs
from course_utils.mesh import mesh_verdicts as v
from course_utils.mesh.mesh3d import stage_model
from course_utils.transformer.model import build, one_process_steps

SIZES = MeshSizes()


@pytest.fixture(scope="module")
def run():
    return mesh_runs.run_mesh(SIZES)


def test_every_shard_equals_its_slice_of_one_process(run):
    print(f"largest difference {max(run.diffs.values()):.1e}, launch {run.launch_seconds:.1f} s")
    assert sorted(run.diffs) == list(range(8))
    assert v.mesh_equals_one_process(run.diffs, SIZES.tolerance).ok
    assert run.losses == pytest.approx(run.reference_losses, abs=1e-5)
    trained = one_process_steps(SIZES.model, SIZES.steps)["params"]
    start = build(SIZES.model).state_dict()
    moved = max((trained[k] - start[k]).abs().max().item() for k in start)
    assert moved > 100 * SIZES.tolerance  # the comparison is not of two untouched models


def test_bytes_per_dimension_equal_the_formula_exactly(run):
    assert run.same_every_step
    assert v.mesh_bytes_match_formula(run.bytes, run.formula).ok
    assert all(b["dp"] > 0 and b["pp"] > 0 and b["tp"] > 0 for b in run.bytes.values())
    lines = mesh_runs.bytes_lines(run)
    assert lines[5].startswith("rank 5 (dp 1, pp 0, tp 1): dp 8288 B (formula 8288)")


def test_device_mesh_groups_are_the_layouts_lines(run):
    expected = groups.mesh_groups(SIZES.shape, SIZES.dims)
    assert run.groups == expected
    assert v.mesh_groups_match(run.groups, expected).ok
    assert {r: tuple(c.values()) for r, c in run.coords.items()} == {
        r: groups.coords_of(r, SIZES.shape) for r in range(8)
    }


def test_mesh_picture_titles_from_the_data(run):
    fig = mesh_charts.mesh_picture(run.bytes, SIZES.shape, SIZES.dims)
    title = fig.axes[0].get_title()
    assert "8 ranks as 2 dp x 2 pp x 2 tp" in title and "tp carries the most" in title
    heavier_dp = {r: {**b, "dp": 10 * b["dp"]} for r, b in run.bytes.items()}
    fig = mesh_charts.mesh_picture(heavier_dp, SIZES.shape, SIZES.dims)
    assert "dp carries the most" in fig.axes[0].get_title()


def _report(rank: int, params: dict) -> dict:
    at = dict(zip(SIZES.dims, groups.coords_of(rank, SIZES.shape), strict=True))
    full = build(SIZES.model)
    full.load_state_dict(params)
    shard = stage_model(full, at["pp"], 2, at["tp"], 2)
    return {"rank": rank, "coords": at,
            "params": {k: p.detach().tolist() for k, p in shard.named_parameters()}}  # fmt: skip


def test_shard_diffs_see_an_untrained_or_misplaced_shard():
    trained = one_process_steps(SIZES.model, SIZES.steps)["params"]
    assert mesh_runs.shard_diffs([_report(5, trained)], SIZES, trained) == {5: 0.0}
    untrained = _report(5, build(SIZES.model).state_dict())
    assert mesh_runs.shard_diffs([untrained], SIZES, trained)[5] > SIZES.tolerance
    other_tp = {**_report(4, trained), "rank": 5, "coords": _report(5, trained)["coords"]}
    assert mesh_runs.shard_diffs([other_tp], SIZES, trained)[5] > SIZES.tolerance
    other_stage = {**_report(7, trained), "rank": 5, "coords": _report(5, trained)["coords"]}
    assert mesh_runs.shard_diffs([other_stage], SIZES, trained)[5] == math.inf
    for wrong in (untrained, other_tp, other_stage):  # 11's verdict on what shard_diffs found
        diffs = mesh_runs.shard_diffs([_report(0, trained), wrong], SIZES, trained)
        assert not v.mesh_equals_one_process(diffs, SIZES.tolerance)


def test_a_mesh_that_never_averages_over_dp_misses_the_formula_and_one_process(monkeypatch, capsys):
    """11's run with the slip of a step that forgets to average the gradients over its
    data-parallel replicas: nothing crosses dp, and the two replicas drift apart."""
    monkeypatch.setattr(mesh_runs, "sync_dp", lambda model, group: None)
    run = mesh_runs.run_mesh(SIZES)
    assert all(sent["dp"] == 0 for sent in run.bytes.values())
    assert not v.mesh_bytes_match_formula(run.bytes, run.formula)
    assert max(run.diffs.values()) > SIZES.tolerance
    assert not v.mesh_equals_one_process(run.diffs, SIZES.tolerance)
    assert capsys.readouterr().out.count("✗ ") == 2


def test_a_device_mesh_built_with_its_dimensions_reversed_has_other_groups(monkeypatch):
    """11's run with the slip of naming DeviceMesh's dimensions in the other order (tp, pp,
    dp): its dp groups are the layout's tp lines, and the verdict prints ✗."""
    import torch.distributed.device_mesh as device_mesh

    build_mesh = device_mesh.init_device_mesh

    def reversed_dims(kind, shape, mesh_dim_names):
        return build_mesh(kind, shape[::-1], mesh_dim_names=mesh_dim_names[::-1])

    monkeypatch.setattr(device_mesh, "init_device_mesh", reversed_dims)
    run = mesh_runs.run_mesh(SIZES)
    expected = groups.mesh_groups(SIZES.shape, SIZES.dims)
    assert run.groups["dp"] == expected["tp"] != expected["dp"]
    assert not v.mesh_groups_match(run.groups, expected)


def test_a_mesh_the_model_or_batch_cannot_fill_is_refused():
    with pytest.raises(ValueError, match="multiple of 6"):
        mesh_runs.check_layout(replace(SIZES, microbatches=3))
    with pytest.raises(ValueError, match="must be named"):
        mesh_runs.check_layout(replace(SIZES, dims=("dp", "pp", "cp")))
    with pytest.raises(ValueError, match="pipeline stages"):
        mesh_runs.check_layout(replace(SIZES, shape=(1, 4, 2), model=replace(SIZES.model, batch=4)))
    with pytest.raises(ValueError, match="attention heads"):
        stage_model(build(SIZES.model), 0, 2, 0, 4)


def test_config_travels_as_json():
    cfg = replace(SIZES, shape=(2, 1, 4), model=replace(SIZES.model, heads=4))
    assert mesh_runs.mesh_config(mesh_runs.config_json(cfg)) == cfg
    assert mesh_runs.mesh_config(cfg) is cfg


@pytest.mark.parametrize("shape", [(2, 2, 2), (1, 2, 1), (2, 1, 2), (1, 1, 1)])
def test_the_formulas_parameter_count_is_the_stage_models(shape):
    cfg = replace(SIZES, shape=shape)
    table = mesh_runs.bytes_formula(cfg)
    for rank, sent in table.items():
        at = dict(zip(cfg.dims, groups.coords_of(rank, shape), strict=True))
        shard = stage_model(build(cfg.model), at["pp"], shape[1], at["tp"], shape[2])
        params = sum(p.numel() for p in shard.parameters())
        d = shape[0]
        assert sent["dp"] == 2 * (d - 1) * params * mesh_runs.FP32 // d
        assert (sent["tp"] == 0) == (shape[2] == 1) and (sent["pp"] == 0) == (shape[1] == 1)
