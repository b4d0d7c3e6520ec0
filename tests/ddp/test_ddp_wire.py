"""DDP's hooks over the emulated link, and the fixes compared at one effective batch."""

from __future__ import annotations

import pytest
import torch

from course_utils import ddp as dp
from course_utils import network
from course_utils.core.machine import MachineShare
from course_utils.ddp import cost, equivalence, wire
from course_utils.network.clock import LAG

SLOW = network.wire.parse("8mbit,10ms")
SLOWER = network.wire.parse("8mbit,100ms")


def test_hooks_put_what_they_send_on_the_wire():
    grads = [torch.zeros(64, 40), torch.zeros(64), torch.zeros(10, 64)]
    plain = wire.wire_seconds(SLOW, "allreduce", grads, 2)
    assert plain == pytest.approx(network.wire.ring_allreduce_seconds(SLOW, 4 * 3264, 2))
    half = wire.wire_seconds(SLOW, "fp16", grads, 2)
    assert half == pytest.approx(network.wire.ring_allreduce_seconds(SLOW, 2 * 3264, 2))
    powersgd = wire.wire_seconds(SLOW, "powersgd", grads, 2)
    assert powersgd > half  # three latency-bound rings for a few hundred floats
    assert wire.wire_seconds(network.wire.REAL, "powersgd", grads, 2) == 0


def test_every_fix_runs_at_naive_ddps_effective_batch():
    variants = cost.standard_variants(8, accumulate=4)
    assert {v.per_rank_batch * v.accumulate for v in variants} == {8}
    # no_sync and its control: the same micro-batches, with and without no_sync
    accumulated = [v for v in variants if v.accumulate == 4]
    assert [v.no_sync for v in accumulated] == [True, False]
    assert {v.per_rank_batch for v in accumulated} == {2}
    with pytest.raises(ValueError, match="multiple of 4"):
        cost.standard_variants(6, accumulate=4)


def test_the_emulated_link_sets_ddps_communication_time():
    """Spans are wall-clock spans (as the step's other phases), while the hook hands a bucket
    back when its wire time is over on the rank's link clock, which may lag the wall clock
    by up to `clock.LAG` on a busy machine: so a 100 ms link, whose ring outlasts that lag
    several times, and a bound of the ring's time less the lag."""
    setup = dp.Setup(hidden=16)
    naive = cost.Variant("naive", 8)
    powersgd = cost.Variant("PowerSGD", 8, hook="powersgd")
    (real,) = cost.measure([naive], 2, 64, setup)
    slow, compressed = cost.measure([naive, powersgd], 2, 64, setup, link=SLOWER)
    per_sync = slow.communication / slow.syncs
    assert slow.syncs == compressed.syncs == 8
    assert per_sync >= network.wire.ring_allreduce_seconds(SLOWER, 4 * 1000, 2) - LAG
    assert real.syncs == 8  # the same updates on the real link, whose time is not asserted
    assert slow.effective_batch == compressed.effective_batch == 16


def test_a_bare_allreduce_moves_the_models_gradient_bytes_and_takes_some_time():
    setup = dp.Setup(hidden=16)
    model = equivalence.build_model(setup, equivalence.load_data(setup))
    numel = sum(p.numel() for p in model.parameters())
    nbytes, seconds = cost.bare_allreduce(setup, 2, repeats=5)
    assert nbytes == 4 * numel  # fp32 gradients, as naive DDP all-reduces them
    assert 0 < seconds < 1  # a bound of what it promises (a real, finite time), not a speed


class _T:
    def __init__(self, name, per_1000, batch=32, syncs=32, comm_share=0.5, accumulate=1):
        self.name, self.seconds_per_1000_samples, self.world_size = name, per_1000, 2
        self.effective_batch, self.syncs, self.accumulate = batch, syncs, accumulate
        self.seconds, self.communication = 2.0, 2.0 * comm_share


def test_ddp_verdicts_fail_where_the_effect_is_absent():
    from course_utils.ddp import verdicts

    naive, single = _T("naive", 0.4), _T("one", 0.01)
    assert verdicts.slower_than(naive, single, "naive is slower").ok
    assert not verdicts.slower_than(single, naive, "naive is slower").ok
    assert verdicts.no_sync_saves_no_syncs(naive, _T("no_sync", 0.41), SLOW).ok
    assert verdicts.no_sync_saves_no_syncs(naive, _T("no_sync, more compute", 0.55), SLOW).ok
    assert not verdicts.no_sync_saves_no_syncs(naive, _T("no_sync, half the time", 0.2), SLOW).ok
    bigger_batch = _T("no_sync x8 at 8x the batch", 0.05, batch=256, syncs=4)
    assert not verdicts.no_sync_saves_no_syncs(naive, bigger_batch, SLOW).ok
    hog = MachineShare(cores=2, seconds=1.0, others_cores=1.0, machine_cores=2)
    assert not verdicts.no_sync_saves_no_syncs(naive, bigger_batch, SLOW, machine=hog).judged
    assert not verdicts.slower_than(naive, bigger_batch, "slower", hog).judged
    assert verdicts.saving(naive, _T("fp16", 0.35)) == pytest.approx(0.05)
    # the lines name the clock of the link the rows crossed
    outweighs = verdicts.communication_outweighs_one_process
    assert repr(outweighs(naive, single, network.wire.REAL)).startswith("✓ real clock")
    assert "simulated link" in repr(outweighs(naive, single, SLOW))
    # half of 0.4 s is all-reduce: more than one process's 0.01 s, not more than its 0.3 s
    assert verdicts.communication_outweighs_one_process(naive, single, network.wire.REAL).ok
    slower_single = _T("one, slower", 0.3)
    assert not verdicts.communication_outweighs_one_process(
        naive, slower_single, network.wire.REAL
    ).ok
    # one rank (the gpu profile on one GPU) all-reduces with nobody: said, not judged
    naive.world_size = 1
    assert verdicts.communication_outweighs_one_process(naive, single, network.wire.REAL) is None
    naive.world_size = 2
    small, powersgd, fp16 = _T("0.001 MB", 0.6), _T("PowerSGD", 0.5), _T("fp16", 0.3)
    assert verdicts.smaller_buckets_cost_more(small, naive, SLOW).ok
    assert not verdicts.smaller_buckets_cost_more(_T("0.001 MB, free", 0.3), naive, SLOW).ok
    assert verdicts.powersgd_costs_more_than_fp16(powersgd, fp16, SLOW).ok
    assert not verdicts.powersgd_costs_more_than_fp16(fp16, powersgd, SLOW).ok


def test_no_sync_verdict_fails_where_it_cuts_nothing():
    """no_sync against the same micro-batches accumulated without it (04 stored 0.140 s
    against about twice that per 1000 samples, with 4x the syncs)."""
    from course_utils.ddp import verdicts

    no_sync = _T("no_sync 4 x 4", 0.14, syncs=32, accumulate=4)
    every_micro = _T("4 x 4 without no_sync", 0.30, syncs=128, accumulate=4)
    line = verdicts.no_sync_cuts_syncs(no_sync, every_micro, network.wire.REAL)
    assert line.ok and repr(line).startswith("✓ real clock: accumulating")
    assert "simulated link" in repr(verdicts.no_sync_cuts_syncs(no_sync, every_micro, SLOW))
    # the effect absent: the control synced as rarely (a no_sync that did nothing) ...
    same_syncs = _T("4 x 4, syncs once", 0.30, syncs=32, accumulate=4)
    assert not verdicts.no_sync_cuts_syncs(no_sync, same_syncs, network.wire.REAL).ok
    # ... or the syncs went but the time did not (a link whose all-reduces cost nothing)
    free_link = _T("4 x 4 without no_sync, free all-reduces", 0.15, syncs=128, accumulate=4)
    assert not verdicts.no_sync_cuts_syncs(no_sync, free_link, network.wire.REAL).ok
    assert verdicts.no_sync_cuts_syncs(no_sync, free_link, network.wire.REAL, share=0.05).ok
    # ... or no sync was counted on either side (0 = 4 x 0): nothing shows what went
    uncounted = [
        _T(r.name, r.seconds_per_1000_samples, syncs=0, accumulate=4)
        for r in (no_sync, every_micro)
    ]
    assert not verdicts.no_sync_cuts_syncs(*uncounted, network.wire.REAL).ok
    # ... or nothing was accumulated: one micro-batch per update has no syncs to cut
    naive = _T("naive", 0.10, syncs=32)
    assert not verdicts.no_sync_cuts_syncs(naive, _T("naive", 0.2, syncs=32), network.wire.REAL).ok
    hog = MachineShare(cores=2, seconds=1.0, others_cores=1.0, machine_cores=2)
    assert not verdicts.no_sync_cuts_syncs(
        no_sync, every_micro, network.wire.REAL, machine=hog
    ).judged


def test_overlap_saving_is_measured_and_its_verdict_fails_without_overlap():
    """The measured step pays every bucket's wire (a fact of the emulated link); how much
    overlap saves on this machine is `python -m course_utils bench ddp-overlap`'s figure."""
    from course_utils.ddp import verdicts
    from course_utils.ddp.overlap import overlap_saving

    result = overlap_saving(
        layers=4, width=256, batch=128, bucket_cap_mb=0.2, link="1gbit,2ms", attempts=1
    )
    gradient_bytes = 4 * (3 * (256 * 256 + 256) + 256 * 10 + 10)
    wire = network.wire.ring_allreduce_seconds(network.wire.parse("1gbit,2ms"), gradient_bytes, 2)
    assert result["buckets"] > 1 and result["machine"].cores == 2
    assert result["sequential"] == pytest.approx(result["compute"] + result["communication"])
    assert result["overlapped"] >= wire and result["communication"] >= wire
    assert result["compute"] > result["forward"] > 0
    assert 0 < result["last_bucket"] < result["communication"]
    others = result["communication"] - result["last_bucket"]  # the last starts after backward
    assert result["hideable"] == min(result["compute"] - result["forward"], others)
    assert result["saving"] == result["sequential"] - result["overlapped"]
    # the verdict on times written down, not measured: how much overlap saves is a timing
    assert result["clock"] == "simulated link, real compute"
    step = {"clock": result["clock"], "compute": 1.0, "forward": 0.2, "hideable": 0.8}
    step["communication"] = 2.0
    assert verdicts.overlap_saves({**step, "saving": 0.6}).ok
    half = {**step, "saving": 0.3}
    assert not verdicts.overlap_saves(half).ok and verdicts.overlap_saves(half, share=0.25).ok
    none = {**result, "overlapped": result["sequential"], "saving": 0.0}
    assert not verdicts.overlap_saves(none).ok
    hog = MachineShare(cores=2, seconds=1.0, others_cores=1.0, machine_cores=2)
    assert not verdicts.overlap_saves({**none, "machine": hog}).judged


def test_an_overlapped_step_shorter_than_its_communication_is_refused():
    """04 once stored 52.6 ms overlapped against 53.0 ms of communication alone, because
    the forward pass before the first bucket was not on the link's clock."""
    from course_utils.ddp import verdicts

    possible = {"compute": 0.03, "forward": 0.01, "communication": 0.053, "overlapped": 0.068}
    possible["clock"] = "simulated link, real compute"
    assert verdicts.overlap_physically_possible(possible).ok
    stored_once = {**possible, "compute": 0.0263, "forward": 0.009, "communication": 0.053}
    assert not verdicts.overlap_physically_possible({**stored_once, "overlapped": 0.0526}).ok
    assert not verdicts.overlap_physically_possible({**possible, "overlapped": 0.02}).ok


def test_overlap_on_the_real_link_names_the_real_clock():
    """The gpu profile's overlap runs on the real link: on an H200 its line said "simulated"."""
    from course_utils.ddp import verdicts
    from course_utils.ddp.overlap import overlap_saving

    result = overlap_saving(layers=2, width=64, batch=32, steps=2, link="real", attempts=1)
    assert result["clock"] == "real clock"
    assert verdicts.overlap_saves(result).claim.startswith("real clock:")


def test_the_overlap_bench_prints_its_target_and_whether_it_met_it(monkeypatch):
    import argparse

    from course_utils.ddp import bench_overlap, overlap

    quiet = MachineShare(cores=2, seconds=1.0, others_cores=0.0, machine_cores=2)
    measured = {"link": "l", "buckets": 3, "compute": 1.0, "communication": 2.0, "clock": "c"}
    measured |= {"forward": 0.2, "hideable": 0.8, "sequential": 3.0, "overlapped": 2.2}
    measured |= {"saving": 0.8, "machine": quiet}
    monkeypatch.setattr(overlap, "overlap_saving", lambda *a: dict(measured))
    parser = argparse.ArgumentParser()
    bench_overlap.add_arguments(parser)
    out = bench_overlap.run(parser.parse_args(["--link", "1gbit,2ms"]))
    assert out["met"] and "50%" in out["target"] and out["saving_over_shorter"] == 1.0
    assert out["link"] == "1000mbit,2ms" and out["link_label"] == "l"
    assert out["clock"] == "simulated" and out["judged"] and out["others_cores"] == 0.0
    measured["saving"] = 0.3
    assert not bench_overlap.run(parser.parse_args([]))["met"]
    measured["machine"] = MachineShare(cores=2, seconds=1.0, others_cores=1.0, machine_cores=2)
    busy = bench_overlap.run(parser.parse_args([]))
    assert not busy["judged"] and busy["met"] is None
