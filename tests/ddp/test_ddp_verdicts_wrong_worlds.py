"""Notebook 04's timing verdicts, run through the notebook's own runs (`cost.measure` and
`measure_single`, `overlap.overlap_saving`, `trace.profiled_step`) in a world with one slip:
each prints ✗ there, and ✓ in the right world at the same small sizes.

The other verdicts of 04 have their wrong worlds in test_replica_verdicts.py (summed or never
averaged gradients, a summing DDP, an lr never scaled, a sweep that stops short, one bucket
reduced after the backward). Left without one: `overlap_saves`: on the simulated link a hook
that waits for every bucket before the backward pass goes on saved 0.38-2.01 of what could be
hidden, DDP's own hook 0.37-2.61 (the verdict asks 0.5; 4 and 6 layers of 256, 12 runs each,
a busy machine), since a wait on a bucket's future does not move the rank's link clock and
the compute after it hides behind the wire; the notebook judges it only on a quiet machine,
which a test under the suite's load is not. `same_parameters` has its wrong world (replicas
that never average) beside its torchrun job's right world in test_ddp_equivalence.py.
`scaling.two_ranks_win_above`: 2 ranks at a global batch of 4096 (3 layers of 128, a 3.1 ms
ring) beat one process by 1.12-1.58x, and ranks that each take the whole batch (weak scaling)
lose at 0.66-0.90x (20 runs each, 11 beside a CPU hog; 1.20-1.54x and 0.58-1.08x at 8192),
since one step's CPU time varies by a fifth between launches on busy cores: the right world
printed ✗ at least once in 28 runs of this file. A wide margin for the right world needs a
batch whose computation dwarfs the ring, where the weak-scaling world loses by the ring
alone: at 04's own sizes by 21 ms against 165 ms of computation (0.89x).

Section 5's verdicts are called with no machine share: on these simulated links the wire is
most of every step, so the other programs on the cores move the rows little.
`overlap_physically_possible` is judged as 04 judges it in the right world (on a busy
machine: not judged) and without the share in the wrong one.
"""

from __future__ import annotations

import contextlib

import pytest

from course_utils import ddp
from course_utils.core import training
from course_utils.ddp import cost, overlap, trace, verdicts
from course_utils.ddp import wire as ddp_wire
from course_utils.ddp.equivalence import wrap
from course_utils.network import wire

SETUP = ddp.Setup()  # the cpu profile's MLP of hidden 64: a gradient of 29.7 kB
VARIANTS = {v.name: v for v in ddp.standard_variants(16, 4)}  # the profile's batch, no_sync
NAIVE, NO_SYNC, EVERY_MICRO = "naive DDP", "no_sync 4 x 4", "4 x 4 without no_sync"
SMALLEST, FP16, POWERSGD = "0.001 MB buckets", "fp16 hook", "PowerSGD hook"


def _fails(v, lines: list[str]) -> None:
    assert not v and f"✗ {v.claim}" in lines


def _passes(v, lines: list[str]) -> None:
    assert v and f"✓ {v.claim}" in lines


def _measured(names: list[str], link, samples_per_rank: int) -> dict:
    rows = cost.measure([VARIANTS[n] for n in names], 2, samples_per_rank, SETUP, link=link)
    return {r.name: r for r in rows}


# --- section 5 over the faster link: the communication and no_sync's syncs ---------------

# a ring of the gradient takes 11.9 ms, and 4 updates are timed: on a faster link (100mbit,1ms:
# 4.4 ms) the scheduler's hiccups on busy cores put no_sync at 0.66-1.58x naive DDP's time,
# across its 0.85 bound, and with 2 updates here at 0.78x once beside two CPU hogs
FAST = wire.parse("30mbit,2ms")
FAST_SAMPLES = 64  # per rank: 4 updates of naive DDP


@pytest.fixture(scope="module")
def fast_right():
    """One process at the effective batch 32, and naive DDP with no_sync and its control."""
    single = cost.measure_single(32, 2 * FAST_SAMPLES, SETUP)
    return single, _measured([NAIVE, NO_SYNC, EVERY_MICRO], FAST, FAST_SAMPLES)


_timed_training = cost._timed_training


def _never_booked(model, loader, variant, samples, threads=None, hook=None):
    """The slip: the timing does not hand the recorder's `close_update` to train."""
    return _timed_training(model, loader, variant, samples, threads)


def test_a_timing_that_never_books_its_updates_sees_no_communication(fast_right, capsys):
    """The slip: `time_replica` forgets to pass `hook=recorder.close_update`, so the recorder
    sees every all-reduce but books none: naive DDP's communication reads 0 s and 0 syncs.
    Right: 0.32-0.38 s of all-reduce per 1000 samples against one process's whole
    0.014-0.051 s (7 runs, 4 of them beside two CPU hogs)."""
    single, right = fast_right
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cost, "_timed_training", _never_booked)
        wrong = _measured([NAIVE], FAST, FAST_SAMPLES)[NAIVE]
    assert wrong.communication == 0 and right[NAIVE].communication > 0
    outweighs = verdicts.communication_outweighs_one_process
    passed, failed = outweighs(right[NAIVE], single, FAST), outweighs(wrong, single, FAST)
    lines = capsys.readouterr().out.splitlines()
    _passes(passed, lines)
    _fails(failed, lines)


def test_accumulating_without_no_sync_fails_both_no_sync_verdicts(fast_right, capsys):
    """The slip: the training loop never enters `model.no_sync()` on the micro-batches before
    the last (`training._syncing` a no-op), so 'no_sync 4 x 4' all-reduces after every one:
    16 syncs like its control's, against naive DDP's 4, and it saves -3% to 4% of the
    control's time. Right: 4, 4 and 16 syncs; no_sync takes 0.98-1.18x naive DDP's time per
    sample and saves 66-73% of its control's (13 runs, 10 of them beside two CPU hogs)."""
    _, right = fast_right
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(training, "_syncing", lambda model, sync: contextlib.nullcontext())
        wrong = _measured([NAIVE, NO_SYNC, EVERY_MICRO], FAST, FAST_SAMPLES)
    assert [wrong[n].syncs for n in (NAIVE, NO_SYNC, EVERY_MICRO)] == [4, 16, 16]
    verdicts_of = [
        lambda rows: verdicts.no_sync_saves_no_syncs(rows[NAIVE], rows[NO_SYNC], FAST),
        lambda rows: verdicts.no_sync_cuts_syncs(rows[NO_SYNC], rows[EVERY_MICRO], FAST),
    ]
    for verdict_of in verdicts_of:
        passed, failed = verdict_of(right), verdict_of(wrong)
        lines = capsys.readouterr().out.splitlines()
        _passes(passed, lines)
        _fails(failed, lines)


# --- section 5 over a slow link: the buckets and the compression hooks --------------------

# a link whose latency and bytes both count: a ring of the fp32 gradient takes 35.8 ms
SLOW = wire.parse("10mbit,6ms")


@pytest.fixture(scope="module")
def slow_right():
    return _measured([NAIVE, SMALLEST], SLOW, 16)


def _sent_at_once(seconds: float) -> float:
    """The slip: a bucket's wire time runs from when it is sent, not after the buckets
    queued before it on the rank's one outgoing wire."""
    return wire.now() + seconds


def test_a_wire_that_carries_buckets_side_by_side_makes_small_buckets_cheap(slow_right, capsys):
    """The slip: the simulated wire does not queue a rank's buckets (`wire_deadline` reserves
    nothing for them). The 0.001 MB buckets (3 of them) then take 0.67-0.77 of naive DDP's
    time per sample, where in the right world each pays its latency in turn: 1.44-1.75x
    (1.92-2.06 s against 1.17-1.34 s per 1000 samples; 10 runs, 3 beside a CPU hog)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ddp_wire, "wire_deadline", _sent_at_once)
        wrong = _measured([NAIVE, SMALLEST], SLOW, 16)
    assert wrong[SMALLEST].buckets == slow_right[SMALLEST].buckets == 3
    passed = verdicts.smaller_buckets_cost_more(slow_right[SMALLEST], slow_right[NAIVE], SLOW)
    failed = verdicts.smaller_buckets_cost_more(wrong[SMALLEST], wrong[NAIVE], SLOW)
    lines = capsys.readouterr().out.splitlines()
    _passes(passed, lines)
    _fails(failed, lines)


def _one_ring(link, hook: str, gradients: list, world: int) -> float:
    """The slip: a hook's all-reduces are charged as one ring of all their bytes."""
    return wire.ring_allreduce_seconds(link, sum(ddp_wire._message_sizes(hook, gradients)), world)


# slower still, and with more latency: fp16's ring takes 47.7 ms of bytes and 40 ms of
# latency; one ring of PowerSGD's 1.8 kB, 5.8 ms and 40 ms. The gap the slip must open, fp16's
# bytes less PowerSGD's, is then twice that over SLOW: there PowerSGD's real matrix work,
# stretched beside three CPU hogs, once brought the slipped PowerSGD to 0.95x fp16's time,
# and beside one hog in the unit stage to more than fp16's
COMPRESSED = wire.parse("5mbit,20ms")


def test_powersgd_charged_one_ring_for_its_three_costs_less_than_fp16(capsys):
    """The slip: the simulated link charges PowerSGD's three all-reduces (its vectors, P and
    Q: 1.8 kB in all) as one ring, one latency. PowerSGD then takes 0.57-0.75 of fp16's time
    per sample, where it takes 1.41-1.92x in the right world (7 runs, 3 beside three CPU
    hogs; fp16 2.0-2.2 s per 1000 samples)."""
    right = _measured([FP16, POWERSGD], COMPRESSED, 16)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ddp_wire, "wire_seconds", _one_ring)
        wrong = _measured([FP16, POWERSGD], COMPRESSED, 16)
    costs_more = verdicts.powersgd_costs_more_than_fp16
    passed = costs_more(right[POWERSGD], right[FP16], COMPRESSED)
    failed = costs_more(wrong[POWERSGD], wrong[FP16], COMPRESSED)
    lines = capsys.readouterr().out.splitlines()
    _passes(passed, lines)
    _fails(failed, lines)


# --- section 6: the overlapped step against the physical bound ----------------------------

# 4 layers of 256, one bucket (the default cap holds the whole 0.8 MB gradient), over a link
# whose ring of it takes 47 ms: the slipped step, which lacks it, stays far below it even when
# other programs stretch the computation. At 1gbit,5ms (a 17 ms ring) the slipped step came
# out at 22.9 ms once, the unit stage beside a CPU hog, and passed as possible.
OVERLAP = dict(layers=4, width=256, batch=128, steps=3, link="1gbit,20ms", attempts=1)


def _off_the_wire(on, bucket):
    """The slip: DDP's hook hands each bucket back when gloo is done with it, without
    waiting for its time on the simulated wire (which `wire.all_reduce` still charges)."""
    return ddp_wire.HOOKS[on.hook](on.state, bucket)


def test_a_hook_that_skips_the_wire_makes_an_impossible_step(capsys):
    """The slip makes the overlapped step 4.3-7.7 ms, far shorter than its 46.7-47.5 ms of
    communication alone (3 runs, one beside a CPU hog), judged without the machine share
    since the wrong step lacks the whole wire time. The right step, 50.4-51.0 ms, is
    1.01-1.05 of its bound; at 1gbit,5ms it was 1.10-1.15 on a quiet machine, 1.02-1.06
    beside a CPU hog, and once printed ✗ there: so it is judged as 04 judges it, with its
    machine share."""
    right = overlap.overlap_saving(**OVERLAP)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(overlap, "on_link_hook", _off_the_wire)
        wrong = overlap.overlap_saving(**OVERLAP)
    assert wrong["overlapped"] < wrong["communication"] < right["overlapped"]
    as_in_04 = verdicts.overlap_physically_possible(right)
    failed = verdicts.overlap_physically_possible({**wrong, "machine": None})
    lines = capsys.readouterr().out.splitlines()
    assert repr(as_in_04) in lines and (as_in_04 or not as_in_04.judged)  # ✓ or not judged
    _fails(failed, lines)


# --- the profiled step: all-reduces inside the backward pass, or none ----------------------

# 6 layers of 256 with 0.01 MB buckets: the first all-reduce leaves with the last layer's
# gradient. At the sizes of test_profiler_sees_ddp_overlap_and_none_after_backward (4 layers of
# 256, the default 1 MB cap) the whole 0.8 MB gradient is one bucket, sent once the backward
# pass is over, and DDP's own step shows no overlap either (0 on both ranks, 3 runs).
PROFILED = dict(layers=6, width=256, batch=256, bucket_cap_mb=0.01, link="1gbit,1ms")
TRACED_OVER = wire.parse(PROFILED["link"])


@pytest.fixture(scope="module")
def after_backward():
    return trace.profiled_step(False, **PROFILED)


def test_the_twin_that_reduces_after_backward_shows_no_overlap(after_backward, capsys):
    """The wrong world: the all-reduces issued once `backward()` has returned (the
    notebook's own twin): 0 on both ranks. DDP's step overlaps 0.62-0.88 of the shorter
    (mean of the ranks, 11 runs, 3 beside a CPU hog)."""
    ddp_step = trace.profiled_step(True, **PROFILED)
    overlaps = verdicts.communication_overlaps_backward
    passed, failed = overlaps(ddp_step, TRACED_OVER), overlaps(after_backward, TRACED_OVER)
    lines = capsys.readouterr().out.splitlines()
    _passes(passed, lines)
    _fails(failed, lines)


def _without_no_sync(model, **options):
    wrapped = wrap(model, **options)
    wrapped.no_sync = contextlib.nullcontext
    return wrapped


def test_a_twin_that_forgets_no_sync_overlaps_after_all(after_backward, capsys):
    """The slip: the twin's backward runs outside `no_sync`, so DDP all-reduces its buckets
    during the backward pass, before the twin's own all-reduces: 0.32-0.90 per rank (11
    runs), where the twin has 0."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(trace, "wrap", _without_no_sync)
        wrong = trace.profiled_step(False, **PROFILED)
    none_overlap = verdicts.none_overlaps_after_backward
    passed, failed = none_overlap(after_backward, TRACED_OVER), none_overlap(wrong, TRACED_OVER)
    lines = capsys.readouterr().out.splitlines()
    _passes(passed, lines)
    _fails(failed, lines)
