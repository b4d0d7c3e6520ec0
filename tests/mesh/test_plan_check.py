"""The planner checked against runs: a small capped set of layouts comes back measured and
predicted, the targets fail when their effect is absent, and the bench prints its shape.

No test asserts a ratio of measured times: that is the bench's job (`bench mesh`)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from course_utils.__main__ import main
from course_utils.core.sizes_model_parallel import MeshSizes, TransformerSizes
from course_utils.mesh import plan_check, planner
from course_utils.mesh.plan_check import LayoutCheck, PlannerCheck, planner_verdicts, targets
from course_utils.mesh.plan_check_charts import planner_vs_runs
from course_utils.mesh.plan_measure import MeshLayout

TINY = MeshSizes(
    model=TransformerSizes(vocab=16, width=32, heads=4, blocks=4, seq_len=16, batch=8),
    timeout=120.0,
)
CAPPED = (MeshLayout(8, 1, 1), MeshLayout(2, 2, 2, 2))


@pytest.fixture(scope="module")
def check() -> PlannerCheck:
    return plan_check.check_planner(TINY, layouts=CAPPED, steps=1)


def test_every_layout_comes_back_measured_and_predicted(check):
    assert [r.layout for r in check.layouts] == ["dp8", "dp2-tp2-pp2-m2"]
    for r in check.layouts:
        assert r.measured_seconds > 0 and r.predicted_seconds > 0
        assert r.measured_peak_bytes > 0 and r.predicted_peak_bytes > 0
    assert check.clock == "simulated" and check.link == plan_check.LINK and check.ranks == 8
    assert check.pick in {"dp8", "dp2-tp2-pp2-m2"}
    assert [type(t.met) for t in check.targets] == [bool] * 4
    assert check.calibration["flops"] > 0


def test_the_calibrated_split_shrinks_with_tp(check):
    """A block's kept bytes per token and width: part whole on every TP rank, part split."""
    assert check.calibration["activations_whole"] > 0
    assert check.calibration["activations_split"] > 0


def _rows(measured, predicted, memory_error=0.0) -> list[LayoutCheck]:
    return [
        LayoutCheck(f"l{i}", m, p, 1000, round(1000 * (1 + memory_error)))
        for i, (m, p) in enumerate(zip(measured, predicted, strict=True))
    ]


MEASURED = [1.0, 1.2, 1.5, 2.0, 3.0, 4.0]


def _met(rows, pick) -> dict[str, bool]:
    return {t.target: t.met for t in targets(rows, pick)}


def test_targets_hold_for_a_planner_that_gets_it_right():
    assert all(_met(_rows(MEASURED, [0.5 * m for m in MEASURED]), "l0").values())


ABSENT = {  # rows where one effect is absent, the pick, and the one target that must fail
    "reversed order": (_rows(MEASURED, MEASURED[::-1]), "l0", 1),
    "pick 20% slower": (_rows([1.2, 1.0, 1.5, 2.0, 3.0, 4.0], [1.0, 1.1, 1.5, 2, 3, 4]), "l0", 0),
    "memory 20% over": (_rows(MEASURED, MEASURED, memory_error=0.2), "l0", 2),
    "memory 20% under": (_rows(MEASURED, MEASURED, memory_error=-0.2), "l0", 2),
    "no spread": (_rows([1.0, 1.1, 1.2], [1.0, 1.1, 1.2]), "l0", 3),
}


@pytest.mark.parametrize("case", ABSENT)
def test_a_target_prints_a_cross_when_its_effect_is_absent(case, capsys):
    rows, pick, failing = ABSENT[case]
    check = PlannerCheck(plan_check.LINK, pick, rows, targets(rows, pick), 8)
    verdicts = planner_verdicts(check)
    assert [v.ok for v in verdicts] == [i != failing for i in range(4)]
    assert f"✗ {check.targets[failing].claim}" in capsys.readouterr().out


def test_a_planner_whose_weights_are_not_split_by_the_pipeline_misses_the_memory(
    check, monkeypatch, capsys
):
    """11's check as the notebook runs it (the same measured runs, reused), with the slip of
    a planner that divides the model's state by TP alone: the pipeline stage's weights,
    gradients and Adam state counted whole, twice what a PP=2 rank holds: dp2-tp2-pp2-m2
    predicted at 625,984 B against 426,148 measured, 47% over. The right planner comes
    within 2-5% of every measured peak here (threshold 10%): dp8's measured peak moves by
    33 KB (3%) from run to run, since the profiler sees only its own thread's frees
    (`memory.peak`). At seq_len 8 dp8's prediction stood 8.5% under its peak, and one run under
    3 test workers missed the 10% with 11.3%."""
    assert check.targets[2].met
    measured = {r.layout: (r.measured_seconds, r.measured_peak_bytes) for r in check.layouts}
    monkeypatch.setattr(plan_check, "measure", lambda layout, *_: measured[layout.name])
    counted = planner.memory

    def state_not_split_by_pp(model, layout, precision="bf16"):
        m = counted(model, layout, precision)
        pp = layout.pp
        return replace(m, params=pp * m.params, grads=pp * m.grads, optimizer=pp * m.optimizer)

    monkeypatch.setattr(planner, "memory", state_not_split_by_pp)
    slipped = plan_check.check_planner(TINY, layouts=CAPPED, steps=1)
    capsys.readouterr()
    assert [v.ok for v in planner_verdicts(slipped)][2] is False
    assert "✗ every layout's predicted bytes per rank are within 10%" in capsys.readouterr().out


def test_spearman_of_ties_and_orders():
    assert plan_check.spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert plan_check.spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    assert plan_check.spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(0.866, abs=1e-3)


def test_the_bench_prints_its_json_shape_and_a_table(check, monkeypatch, capsys):
    monkeypatch.setattr(plan_check, "check_planner", lambda **_: check)
    assert main(["bench", "mesh", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["clock"] == "simulated" and out["pick"] == check.pick and out["ranks"] == 8
    assert {tuple(sorted(r)) for r in out["layouts"]} == {
        ("layout", "measured_peak_bytes", "measured_seconds", "predicted_peak_bytes",
         "predicted_seconds")
    }  # fmt: skip
    assert all(set(t) == {"target", "value", "threshold", "met"} for t in out["targets"])
    assert out["all_met"] == all(t["met"] for t in out["targets"])
    assert main(["bench", "mesh"]) == 0
    table = capsys.readouterr().out
    assert "dp2-tp2-pp2-m2" in table and "simulated clock" in table and "all targets met" in table


def test_the_chart_names_its_clock_and_titles_from_the_data():
    rows = _rows(MEASURED, [0.5 * m for m in MEASURED])
    fig = planner_vs_runs(PlannerCheck("10gbe", "l0", rows, targets(rows, "l0"), 4))
    assert "simulated clock" in fig.axes[0].get_title()
    title = fig._suptitle.get_text()
    assert "ρ = 1.00" in title and "l0, is the fastest" in title
    assert f"{len(rows)} layouts on 4 ranks" in title
    wrong = planner_vs_runs(PlannerCheck("10gbe", "l3", rows, targets(rows, "l3"), 4))
    title = wrong._suptitle.get_text()
    assert "l3, runs 100% slower than the fastest measured, l0" in title  # 2.0 s against 1.0


def test_layouts_of_different_rank_counts_are_refused():
    with pytest.raises(ValueError, match="same number of ranks"):
        plan_check.check_planner(TINY, layouts=(MeshLayout(8, 1, 1), MeshLayout(2, 1, 1)))


def test_a_layout_runs_as_the_planner_sees_it():
    layout = MeshLayout(2, 2, 2, 4)
    sizes = layout.sizes(replace(TINY, dims=("dp", "tp", "pp")))
    assert sizes.shape == (2, 2, 2) and sizes.optimizer == "adam" and sizes.microbatches == 4
    planned = layout.planned(global_batch=32)
    assert (planned.dp, planned.tp, planned.pp, planned.micro_batch) == (2, 2, 2, 4)
    assert planned.schedule == "gpipe" and MeshLayout(8, 1, 1).planned(32).schedule == "none"


def test_the_lines_say_how_many_layouts_the_picks_tolerance_admits():
    rows = _rows([1.0, 1.05, 1.2, 2.0], [1.0, 1.1, 1.3, 2.1])
    check = PlannerCheck(plan_check.LINK, "l0", rows, targets(rows, "l0"), 8)
    assert plan_check.target_lines(check)[-1] == (
        "layouts within 10% of the fastest measured: 2 of 4 (l0, l1): the pick's verdict passes "
        "a pick among them"
    )
