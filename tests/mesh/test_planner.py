"""The planner: its layouts, its memory filter, its pick, its presets and its refusals."""

from __future__ import annotations

from dataclasses import replace

import matplotlib
import pytest

from course_utils.mesh.plan_costs import check
from course_utils.mesh.plan_model import Cluster, Model, cluster, course_model, model
from course_utils.mesh.plan_widget import draw_plan, planner_widget
from course_utils.mesh.planner import evaluate, layouts, plan
from course_utils.network.fabric import PRESETS, Link

TOY = Model("toy", 1e9, 1e8, layers=8, hidden=1024, heads=8, seq=1024, global_batch=8, vocab=1000)
LINK = Link(alpha=1e-5, bits_per_second=8e10)
NODE = Cluster("1x4", 1, 4, 80e9, 1e14, LINK, LINK)


def test_every_layout_uses_the_whole_cluster_and_runs():
    found = layouts(TOY, NODE)
    assert {(x.dp, x.tp, x.pp) for x in found} >= {(4, 1, 1), (1, 4, 1), (2, 2, 1), (1, 2, 2)}
    for layout in found:
        assert layout.gpus == 4
        check(TOY, NODE, layout)  # raises if the planner built one that cannot run


def test_the_pick_is_the_fastest_that_fits():
    result = plan(TOY, NODE)
    times = [c.time.total for c in result.layouts]
    assert times == sorted(times)
    assert result.pick is result.layouts[0]
    assert all(c.memory.total <= NODE.memory_bytes for c in result.layouts)
    assert not result.rejected  # 80 GB holds every layout of a 1B model


def test_layouts_that_do_not_fit_are_set_aside_with_the_limit():
    small = replace(NODE, memory_bytes=10e9)  # DDP's 16 GB of model states cannot fit
    result = plan(TOY, small)
    assert result.rejected and result.layouts
    for costed, why in result.rejected:
        assert costed.memory.total > 10e9
        assert "more than the 10 GB of one GPU" in why and "largest part" in why
    assert all(c.memory.total <= 10e9 for c in result.layouts)
    assert plan(TOY, NODE).pick.layout.zero == 0  # with room, plain DDP or TP wins
    assert result.pick.layout.zero > 0 or result.pick.layout.tp * result.pick.layout.pp > 1


def test_nothing_fits_gives_no_pick():
    result = plan(TOY, replace(NODE, memory_bytes=1e6))
    assert result.pick is None and not result.layouts and result.rejected


def test_a_slow_inter_node_link_moves_data_parallelism_inside_the_node():
    slow = Cluster("2x4", 2, 4, 80e9, 1e14, PRESETS["nvlink4"], PRESETS["1gbe"])
    big = replace(TOY, global_batch=16)
    pick = plan(big, slow).pick.layout
    assert pick.dp * pick.tp <= 4  # the DP ring never crosses the 1 GbE link


def test_plan_as_dict_is_json_ready():
    import json

    text = json.dumps(plan(TOY, NODE).as_dict())
    assert '"pick"' in text and '"rejected"' in text


def test_presets_have_their_published_sizes():
    assert model("llama3-8b").params == pytest.approx(8.03e9, rel=2e-3)
    assert model("llama3-70b").params == pytest.approx(70.55e9, rel=2e-3)
    assert model("llama3-70b").layers == 80 and model("llama3-70b").heads == 64


def test_course_preset_counts_the_notebook_10_model():
    from course_utils.core.sizes_model_parallel import TransformerSizes
    from course_utils.transformer.model import build

    sizes = TransformerSizes()
    built = build(sizes)
    assert course_model(sizes).params == sum(p.numel() for p in built.parameters())
    assert course_model(sizes).block_params == sum(p.numel() for p in built.blocks[0].parameters())


def test_course_model_plans_on_the_cpu_cluster():
    result = plan("course", cluster("1x8:cpu", tflops=1.0))
    assert result.pick is not None and result.pick.layout.gpus == 8


def test_cpu_cluster_measures_its_flop_rate():
    assert cluster("1x2:cpu").flops > 1e6


@pytest.mark.parametrize(
    "call, complaint",
    [
        (lambda: model("gpt-5"), "course, llama3-8b, llama3-70b"),
        (lambda: cluster("8x8:tpu"), "h100, cpu"),
        (lambda: cluster("eight nodes"), "NODESxGPUS:KIND"),
        (lambda: cluster("1x8:h100", intra="warp-drive"), "nvlink4"),
        (lambda: plan(TOY, NODE, "fp16"), "'bf16'"),
        (lambda: plan(replace(TOY, global_batch=3, heads=1, layers=1), NODE), "global batch"),
        (lambda: Model("bad", 1e9, 1e8, 8, 1000, 16, 1024, 8, 10), "not divisible by heads"),
        (lambda: Model("bad", 1e9, 1e8, 0, 1024, 8, 1024, 8, 10), "layers must be"),
        (lambda: Model("bad", 1e8, 1e9, 8, 1024, 8, 1024, 8, 10), "block_params"),
        (lambda: replace(NODE, nodes=0), "at least 1"),
    ],
)
def test_bad_input_says_what_to_change(call, complaint):
    with pytest.raises(ValueError, match=complaint):
        call()


def test_evaluate_refuses_more_gpus_than_the_cluster_has():
    from course_utils.mesh.plan_costs import Layout

    with pytest.raises(ValueError, match="add nodes"):
        evaluate(TOY, NODE, Layout(dp=8, tp=1, pp=1))


def test_widget_picture_names_the_pick():
    import matplotlib.pyplot as plt

    result = plan(TOY, NODE)
    fig = plt.figure()
    draw_plan(fig, result, top=5)
    assert result.pick.name in fig._suptitle.get_text()
    assert len(fig.axes) == 2
    plt.close(fig)
    empty = plan(TOY, replace(NODE, memory_bytes=1e6))
    fig = plt.figure()
    draw_plan(fig, empty)
    assert "no layout fits" in fig._suptitle.get_text()
    plt.close(fig)


def test_widget_without_ipympl_shows_the_picture(capsys):
    assert "ipympl" not in matplotlib.get_backend()
    assert planner_widget("llama3-8b", nodes=2) is None


def test_the_node_slider_offers_only_the_counts_the_planner_can_plan(monkeypatch):
    from course_utils.mesh import plan_widget

    assert plan_widget.plannable_nodes("llama3-8b", 8, "h100") == [2**k for k in range(8)]
    shown = {}

    def show_controls(controls, fig, redraw):
        for control in controls.values():
            control.observe(redraw, names="value")
        redraw()
        shown.update(controls=controls, fig=fig)

    monkeypatch.setattr("matplotlib.get_backend", lambda: "widget")
    monkeypatch.setattr(plan_widget, "show_controls", show_controls)
    monkeypatch.setattr(plan_widget, "draw", lambda fig: None)
    planner_widget("llama3-8b", nodes=8)
    controls, fig = shown["controls"], shown["fig"]
    assert 9 not in controls["nodes"].options and controls["nodes"].value == 8
    controls["model"].value = "course"  # plans on 1, 2 or 4 nodes of 8: the nearest is kept
    assert list(controls["nodes"].options) == [1, 2, 4] and controls["nodes"].value == 4
    assert "course on 4x8" in fig._suptitle.get_text()
    matplotlib.pyplot.close(fig)


def test_attention_adds_to_six_flops_per_parameter_what_the_docstring_says():
    for name, share in (("llama3-8b", 0.27), ("llama3-70b", 0.15)):
        m = model(name)
        assert 3 * m.forward_flops_per_token() / (6 * m.params) - 1 == pytest.approx(
            share, abs=0.01
        )
    m = model("llama3-8b")
    assert m.forward_flops_per_token(tp=2, pp=4) == pytest.approx(m.forward_flops_per_token() / 8)
