"""The planner's accounting against values worked out by hand for a small case."""

from __future__ import annotations

import math

import pytest

from course_utils.memory.calculator import per_rank_bytes
from course_utils.mesh.plan_costs import Layout, memory, step_time
from course_utils.mesh.plan_model import Cluster, Model
from course_utils.network.fabric import Link

LINK = Link(alpha=1e-5, bits_per_second=8e10, name="10 GB/s")  # 1e-10 s per byte
SLOW = Link(alpha=1e-4, bits_per_second=8e9, name="1 GB/s")
TOY = Model("toy", 1e9, 1e8, layers=8, hidden=1024, heads=8, seq=1024, global_batch=8, vocab=1000)
NODE = Cluster("1x4", 1, 4, 80e9, 1e14, LINK, SLOW)
ATTENTION = 4 * 8 * 1024 * 1024  # forward FLOPs per token: 4 x layers x seq x hidden
FORWARD = (2 * 1e9 + ATTENTION) * 1024 / 1e14  # one sequence's forward on one whole rank


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9)


def test_data_parallel_step_by_hand():
    layout = Layout(dp=4, tp=1, pp=1, zero=0, microbatches=2, micro_batch=1)
    t = step_time(TOY, NODE, layout, "bf16")
    # (6 Ψ + 12 L s h) T / (N R): 0.12288 s for the parameters, 1.7% more for attention
    assert close(t.compute, (6 * 1e9 + 3 * ATTENTION) * 8 * 1024 / (4 * 1e14))
    allreduce = 2 * 3 * (1e-5 + 2e9 / 4 * 1e-10)  # ring of 2 GB of bf16 gradients over 4
    assert close(t.dp_traffic, allreduce)
    backward = 2 * FORWARD  # the last micro-batch's backward hides this much
    assert close(t.dp, allreduce - backward)
    assert t.tp == t.pp == t.bubble == 0


def test_tensor_and_pipeline_step_by_hand():
    layout = Layout(dp=1, tp=2, pp=2, schedule="1f1b", microbatches=8, micro_batch=1)
    t = step_time(TOY, NODE, layout, "bf16")
    assert close(t.compute, 8 * 3 * FORWARD / 4)  # 8 micro-batches of a quarter model each
    message = 1024 * 1024 * 2  # b·s·h bf16
    ring = 2 * 1 * (1e-5 + message / 2 * 1e-10)
    assert close(t.tp, 8 * 4 * 4 * ring)  # micro-batches x blocks per stage x 4 all-reduces
    assert close(t.bubble, (t.compute + t.tp) * (1 / 9) / (8 / 9))  # (K-1)/(M+K-1) = 1/9
    assert close(t.pp, 8 * (1e-5 + message / 2 * 1e-10))  # 16 hand-offs over 2 ranks
    assert t.dp == t.dp_traffic == 0


def test_full_recomputation_costs_a_forward_and_two_collectives():
    plain = Layout(dp=1, tp=2, pp=2, schedule="1f1b", microbatches=8)
    full = Layout(dp=1, tp=2, pp=2, schedule="1f1b", microbatches=8, recompute="full")
    a, b = step_time(TOY, NODE, plain), step_time(TOY, NODE, full)
    assert close(b.compute, a.compute * 8 / 6)
    assert close(b.tp, a.tp * 6 / 4)


def test_data_parallel_crosses_nodes_on_the_inter_node_link():
    two_nodes = Cluster("2x2", 2, 2, 80e9, 1e14, LINK, SLOW)
    layout = Layout(dp=4, tp=1, pp=1, microbatches=2)
    traffic = step_time(TOY, two_nodes, layout).dp_traffic
    assert close(traffic, 2 * 3 * (1e-4 + 2e9 / 4 * 1e-9))


def test_fsdp_gathers_for_every_micro_batch():
    layout = Layout(dp=4, tp=1, pp=1, zero=3, microbatches=2)
    t = step_time(TOY, NODE, layout)
    half = 3 * (1e-5 + 2e9 / 4 * 1e-10)  # all-gather or reduce-scatter of 2 GB over 4
    assert close(t.dp_traffic, 2 * 2 * half + half)
    forward, backward = FORWARD, 2 * FORWARD
    exposed = 2 * (half - forward) + (half - backward) + (2 * half - backward)
    assert close(t.dp, exposed)


def test_memory_by_hand():
    layout = Layout(dp=4, tp=1, pp=1, zero=0, microbatches=2)
    mem = memory(TOY, layout, "bf16")
    assert (mem.params, mem.grads, mem.optimizer) == (2e9, 2e9, 12e9)  # 16 bytes/param
    block = 1024 * 1 * 1024 * (34 + 5 * 8 * 1024 / 1024)  # Korthikanti: s b h (34 + 5as/h)
    logits = 4 * 1024 * (1024 + 1000)
    assert close(mem.activations, 8 * block + logits)
    assert close(mem.working_set, 2 * 1e8)  # one bf16 gradient of the largest block


def test_pipeline_schedules_hold_different_activations():
    def held(schedule):
        layout = Layout(dp=1, tp=2, pp=2, schedule=schedule, microbatches=8)
        return memory(TOY, layout).activations

    logits = 4 * 1024 * (1024 + 1000) / 2
    block = 1024 * 1024 * 74 / 2  # TP + SP divide it by t = 2
    assert close(held("1f1b"), 2 * 4 * block + logits)  # K micro-batches of L/K blocks
    assert close(held("gpipe"), 8 * 4 * block + logits)  # all M
    assert close(held("interleaved"), 2 * 4 * block * (1 + 1 / 4) + logits)


def test_recomputation_and_precision_scale_the_activations():
    def act(recompute, precision="bf16"):
        return memory(TOY, Layout(dp=8, tp=1, pp=1, recompute=recompute), precision)

    assert close(act("selective").activations - 4 * 1024 * 2024, 8 * 1024 * 1024 * 34)
    assert close(act("full").activations - 4 * 1024 * 2024, 8 * 1024 * 1024 * 2)
    assert close(act("none", "fp32").activations, 2 * act("none").activations)
    assert act("none", "fp32").optimizer == 8 * 1e9 / 1  # fp32 Adam: two moments, 8 bytes


def test_memory_agrees_with_chapter_08_calculator():
    layout = Layout(dp=4, tp=2, pp=1, zero=3, microbatches=1, micro_batch=2)
    mem = memory(TOY, layout, "bf16")
    ch08 = per_rank_bytes(1e9 / 2, 4, 3, "mixed", mem.activations, largest_layer=1e8 / 2)
    assert close(mem.total, sum(ch08.values()))


@pytest.mark.parametrize(
    "layout, complaint",
    [
        (Layout(dp=1, tp=3, pp=1, microbatches=8), "does not divide the 8 heads"),
        (Layout(dp=4, tp=2, pp=1, microbatches=1, micro_batch=2), "cluster 1x4 has 4"),
        (Layout(dp=1, tp=1, pp=2, microbatches=8), "schedule 'none' with PP 2"),
        (Layout(dp=1, tp=1, pp=3, schedule="1f1b", microbatches=8), "do not split"),
        (Layout(dp=2, tp=1, pp=2, schedule="interleaved", microbatches=1, micro_batch=4),
         "divisible by PP"),
        (Layout(dp=2, tp=1, pp=1, microbatches=3), "global batch 8"),
        (Layout(dp=4, tp=1, pp=1, zero=4, microbatches=2), "ZeRO stage"),
    ],
)  # fmt: skip
def test_bad_layouts_say_what_to_change(layout, complaint):
    with pytest.raises(ValueError, match=complaint):
        step_time(TOY, NODE, layout)


def test_tensor_parallel_stays_inside_a_node():
    two_nodes = Cluster("2x2", 2, 2, 80e9, 1e14, LINK, SLOW)
    with pytest.raises(ValueError, match="inside a node"):
        step_time(TOY, two_nodes, Layout(dp=1, tp=4, pp=1, microbatches=8))


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="'fp32'.*'bf16'"):
        memory(TOY, Layout(dp=8, tp=1, pp=1), "fp16")


def test_layout_names_read_as_the_mesh():
    assert Layout(4, 2, 2, 3, "1f1b", 8, 1, "full").name == "fsdp4-tp2-pp2-1f1b-m8x1-rcf"
    assert Layout(4, 1, 1, 1).name == "dp4z1-tp1-pp1-m1x1"


def test_a_pipeline_stage_holds_two_hand_off_buffers_in_backward(monkeypatch):
    """The gradient a stage receives for its output and the one it sends for its input, one
    micro-batch between blocks each, on top of the backward's working set; none without PP."""
    from course_utils.mesh import plan_costs

    flat = Layout(dp=2, tp=2, pp=1, microbatches=4, micro_batch=1)
    piped = Layout(dp=1, tp=2, pp=2, schedule="1f1b", microbatches=8, micro_batch=1)
    assert plan_costs.handoff_bytes(TOY, flat, "bf16") == 0
    assert plan_costs.handoff_bytes(TOY, piped, "bf16") == 2 * 1024 * 1 * 1024 * 2  # 2 b·s·h
    handoff = plan_costs.handoff_bytes(TOY, piped, "fp32")
    assert handoff == 2 * 1024 * 1 * 1024 * 4
    counted = memory(TOY, piped, "fp32").working_set
    monkeypatch.setattr(plan_costs, "handoff_bytes", lambda *_: 0.0)
    assert close(counted - memory(TOY, piped, "fp32").working_set, handoff)
