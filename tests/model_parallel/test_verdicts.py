"""Every verdict of notebook 06 passes on a case with the effect and fails without it."""

from __future__ import annotations

import types

import pytest
import torch

from course_utils.core.machine import MachineShare
from course_utils.model_parallel import (
    Work,
    mlp,
    real_compute_run,
    run_pipeline,
    serial_step,
    virtual_pipeline,
)
from course_utils.model_parallel import tensor_parallel as tp
from course_utils.model_parallel import verdicts as v
from course_utils.model_parallel.schedule_play import simulate
from course_utils.ranks.launch import launch


def test_the_paper_schedules_take_the_blogs_slots():
    """06 prints these beside the formulas (a count of the paper schedule: not a verdict)."""
    naive, piped = simulate("naive", 3, 3), simulate("gpipe", 3, 3)
    assert (round(naive.span("F")), round(piped.span("F"))) == (3 * 3, 3 + 3 - 1)
    assert (round(naive.makespan()), round(piped.makespan())) == (2 * 9, 2 * 5)


def test_matches_unsplit_fails_for_a_gradient_or_loss_that_differs():
    assert v.matches_unsplit({"gpipe": 1e-8}, {"gpipe": 2.3}, 2.3)
    assert not v.matches_unsplit({"gpipe": 1e-3}, {"gpipe": 2.3}, 2.3)
    assert not v.matches_unsplit({"gpipe": 1e-8}, {"gpipe": 2.4}, 2.3)


def test_matches_unsplit_fails_for_a_pipeline_that_sums_its_losses(monkeypatch):
    """06's comparison as the notebook makes it, where the pipeline's loss sums over a
    micro-batch's samples instead of averaging them: its loss and gradients are 6x too big."""

    def summed(out, y):
        return torch.nn.functional.cross_entropy(out, y, reduction="sum")

    model, gen = mlp([40, 16, 16, 10], seed=1), torch.Generator().manual_seed(0)
    x, y = torch.randn(24, 40, generator=gen), torch.randint(0, 10, (24,), generator=gen)
    loss, twin = serial_step(model, x, y)
    monkeypatch.setattr(virtual_pipeline, "F", types.SimpleNamespace(cross_entropy=summed))
    run = run_pipeline("gpipe", stages=2, microbatches=4, work=Work(model, x, y))
    gap = max((a - b).abs().max().item() for a, b in zip(run.grads, twin, strict=True))
    assert not v.matches_unsplit({"gpipe": gap}, {"gpipe": run.loss}, loss)


def _report(out=1e-8, grad=1e-8, stored=50, full=100):
    return {
        "output_max_diff": out,
        "grad_max_diff": grad,
        "params_stored": stored,
        "params_full": full,
    }


def test_tp_matches_unsplit_fails_for_a_gradient_that_differs():
    assert v.tp_matches_unsplit([_report(), _report()])
    assert not v.tp_matches_unsplit([_report(), _report(grad=0.1)])


def test_tp_matches_unsplit_fails_where_f_forgets_its_backward_all_reduce(monkeypatch):
    """06's comparison on real ranks, with Megatron's f missing the all-reduce of its backward
    pass: each rank's input gradient is only its own share's part of the sum."""
    from course_utils.parallel import tensor_parallel as plain

    def forgets(ctx, grad):
        return grad, None

    monkeypatch.setattr(plain.CopyToTensorRegion, "backward", staticmethod(forgets))
    widths = [40, 64, 64, 64, 12]
    reports = launch(tp.compare_with_unsplit, 2, backend="gloo", args=(widths, 16, "column_row"))
    assert all(r["output_max_diff"] < 1e-5 for r in reports)  # forward untouched
    assert not v.tp_matches_unsplit(reports)


def _traffic(style: str) -> tuple[dict, float]:
    """What one training step of `style` put across torch.distributed, as 06 counts it."""
    widths, layers = [40, 64, 64, 64, 12], 4
    first = launch(tp.compare_with_unsplit, 2, backend="gloo", args=(widths, 16, style))[0]
    wire = sum(map(sum, tp.bytes_per_layer(first["transfers"], layers).values()))
    return tp.collectives_per_layer(first["transfers"], layers), wire


def test_the_pairing_verdict_fails_for_a_pairing_that_does_not_pair():
    """06's own count, on real ranks: column_row against every_layer passes; every_layer run
    in column_row's place (a Megatron pair that still gathers after every layer) fails, and
    so does a split that skips a layer's collective."""
    (every, every_wire), (paired, paired_wire) = _traffic("every_layer"), _traffic("column_row")
    counts, wire = {"every_layer": every, "column_row": paired}, {
        "every_layer": every_wire, "column_row": paired_wire}  # fmt: skip
    assert v.pairing_talks_less(counts, wire)
    same = {"every_layer": every, "column_row": every}
    assert not v.pairing_talks_less(same, {"every_layer": every_wire, "column_row": every_wire})
    skipped = {**counts, "every_layer": {**every, "forward": [0, *every["forward"][1:]]}}
    assert not v.pairing_talks_less(skipped, wire)
    assert not v.pairing_talks_less(counts, {**wire, "column_row": every_wire})  # bytes alone


def _rows(measured, m=(1, 2, 4, 8, 16), k=4, clock="simulated"):
    return [
        {
            "clock": clock,
            "microbatches": n,
            "measured": x,
            "predicted": (k - 1) / (n + k - 1),
            "from_stages_and_link": 1.04 * (k - 1) / (n + k - 1),
        }
        for n, x in zip(m, measured, strict=True)
    ]


def test_bubble_verdicts_fail_without_their_effect():
    good = _rows([0.751, 0.61, 0.438, 0.296, 0.169])
    assert v.bubble_shrinks(good)
    assert not v.bubble_shrinks(_rows([0.75, 0.75, 0.75, 0.75, 0.75]))  # M does not help
    assert not v.bubble_shrinks(_rows([0.75, 0.61, 0.438, 0.5, 0.3]))  # a rise past the noise
    assert v.bubble_shrinks(_rows([0.5, 0.34, 0.184, 0.184], m=(1, 2, 4, 8), k=2))  # noise
    assert not v.bubble_shrinks(_rows([0.5, 0.45, 0.4, 0.35], m=(1, 2, 4, 8), k=2))  # not half
    assert v.bubble_explained_by_stage_times(good)
    slow_link = _rows([0.9, 0.83, 0.75, 0.66, 0.6])  # hand-offs the prediction leaves out
    assert not v.bubble_explained_by_stage_times(slow_link)


def test_bubble_verdicts_name_their_clock(capsys):
    real = _rows([0.5, 0.34, 0.2, 0.112, 0.09], k=2, clock="real")
    assert v.bubble_shrinks(real)
    assert "real clock:" in capsys.readouterr().out
    with pytest.raises(ValueError, match="different clocks"):
        v.bubble_shrinks(real[:2] + _rows([0.2], m=(4,), k=2))


def test_bubble_verdicts_on_the_real_clock_are_not_judged_on_a_busy_machine(capsys):
    busy = MachineShare(cores=2, seconds=5.0, others_cores=1.0, machine_cores=2)
    flat = _rows([0.5, 0.5, 0.5, 0.5, 0.5], k=2, clock="real")
    for check in (v.bubble_shrinks, v.bubble_explained_by_stage_times):
        result = check(flat, machine=busy)
        assert not result.judged
    assert not v.same_step_time(1.3, 1.0, machine=busy).judged
    out = capsys.readouterr().out
    assert out.count("not judged") == 3 and "real clock: with real compute 1F1B's step" in out


def test_1f1b_verdicts_fail_when_it_holds_as_much_as_gpipe():
    assert v.same_step_time(1.02, 1.0)
    assert not v.same_step_time(1.3, 1.0)
    quiet = MachineShare(cores=2, seconds=3.0, others_cores=0.1, machine_cores=2)
    assert v.same_step_time(1.02, 1.0, machine=quiet)
    assert not v.same_step_time(1.3, 1.0, machine=quiet)
    held = {
        name: real_compute_run(name, 4, 6, width=64, micro_batch_size=8).timeline.peak_activations
        for name in ("gpipe", "1f1b")
    }
    assert v.f1b_holds_fewer(held["gpipe"], held["1f1b"], 6)
    assert not v.f1b_holds_fewer(held["gpipe"], held["gpipe"], 6)  # GPipe's order as 1F1B
    assert not v.f1b_holds_fewer(held["1f1b"], held["1f1b"], 6)  # a GPipe that frees early


def _unbalanced(schedule: str, heavy: bool):
    """A step played out with each stage's own forward and backward times: stage 1 twice
    the others' when `heavy`."""
    durations = [(2.0, 4.0) if heavy and s == 1 else (1.0, 2.0) for s in range(4)]
    return simulate(schedule, 4, 8, durations=durations)


def test_the_pace_verdict_fails_when_the_heavy_stage_is_not_heavier():
    cost = (1, 2, 1, 1)
    balanced = _unbalanced("gpipe", heavy=False)
    assert v.slowest_stage_sets_the_pace(balanced, _unbalanced("gpipe", heavy=True), cost)
    assert not v.slowest_stage_sets_the_pace(balanced, balanced, cost)  # its blocks ignored
    naive = _unbalanced("naive", heavy=False)  # no overlap: it slows by the extra work alone
    assert not v.slowest_stage_sets_the_pace(naive, _unbalanced("naive", heavy=True), cost)
