"""Notebook 04's timing lessons as verdicts, each failing where its effect is absent.

They take `cost.StepTimes` (or anything with `seconds_per_1000_samples`,
`effective_batch` and `name`); the numbers go on the line before, the verdict carries none.
"""

from __future__ import annotations

from ..core.checks import Verdict, verdict
from ..core.machine import MachineShare
from ..core.timing_claims import timing_claim


def saving(baseline, fix) -> float:
    """Seconds per 1000 samples that `fix` saves against `baseline` (negative: it costs)."""
    return baseline.seconds_per_1000_samples - fix.seconds_per_1000_samples


def slower_than(slow, fast, claim: str, machine: MachineShare | None = None) -> Verdict:
    """`slow` takes longer per 1000 samples than `fast` (wall times: `machine` is what
    other programs took of the ranks' cores while they ran)."""
    return verdict(slow.seconds_per_1000_samples > fast.seconds_per_1000_samples, claim, machine)


FAILS_IN = "test_ddp_verdicts_fail_where_the_effect_is_absent"


@timing_claim("named by its rows", "measurement", FAILS_IN)
def communication_outweighs_one_process(
    naive, single, link, machine: MachineShare | None = None
) -> Verdict | None:
    """Why naive DDP loses: per sample, its all-reduces alone take longer than one
    process's whole step, so no split of the computation could win the time back. One rank
    (the gpu profile on one GPU) all-reduces with nobody: a line says so, nothing is judged."""
    if naive.world_size < 2:
        print(
            "- with 1 rank DDP's all-reduce has no other rank to reach, so there is no "
            "communication to weigh: this needs 2 ranks or more (2 GPUs, or the cpu profile)"
        )
        return None
    per_1000 = naive.seconds_per_1000_samples * naive.communication / naive.seconds
    return verdict(
        per_1000 > single.seconds_per_1000_samples,
        f"{link_clock(link)}: per sample, naive DDP's all-reduces alone take longer than one "
        "process's whole step",
        machine,
    )


@timing_claim("named by its rows", "measurement", FAILS_IN)
def smaller_buckets_cost_more(smallest, naive, link, machine: MachineShare | None = None):
    """The smallest buckets make the most all-reduces, and each has a fixed cost: the
    link's latency, and gloo's own work per call."""
    return slower_than(
        smallest,
        naive,
        f"{link_clock(link)}: smaller buckets cost more: DDP makes more all-reduces, and "
        "every one has a fixed cost",
        machine,
    )


@timing_claim("named by its rows", "measurement", FAILS_IN)
def powersgd_costs_more_than_fp16(powersgd, fp16, link, machine: MachineShare | None = None):
    """On a small model PowerSGD's fewer bytes save less than its three all-reduces (and
    its own matrix work) cost, against fp16's one all-reduce of half the bytes."""
    return slower_than(
        powersgd,
        fp16,
        f"{link_clock(link)}: PowerSGD (three small all-reduces and its own matrix work) costs "
        "more than fp16 (one all-reduce)",
        machine,
    )


@timing_claim("named by its rows", "measurement", FAILS_IN)
def no_sync_saves_no_syncs(
    naive, accumulated, link, tolerance: float = 0.15, machine: MachineShare | None = None
) -> Verdict:
    """At an equal effective batch, accumulating micro-batches under no_sync syncs as often
    per sample as naive DDP, so it saves no time (its smaller micro-batches may cost some
    compute, as they did in 04: 4 of 4 took about twice the compute of 1 of 16)."""
    ratio = accumulated.seconds_per_1000_samples / naive.seconds_per_1000_samples
    return verdict(
        accumulated.syncs == naive.syncs and ratio >= 1 - tolerance,
        f"{link_clock(link)}: at an equal effective batch no_sync makes as many syncs as naive "
        f"DDP and saves no time (it is never {tolerance:.0%} faster): against naive DDP it "
        "saves memory, not communication",
        machine,
    )


@timing_claim(
    "named by its rows", "measurement", "test_no_sync_verdict_fails_where_it_cuts_nothing"
)
def no_sync_cuts_syncs(
    no_sync, every_micro, link, share: float = 0.1, machine: MachineShare | None = None
) -> Verdict:
    """What `no_sync` is for: accumulating the same micro-batches without it all-reduces
    after every one of them, k syncs per update; under `no_sync` only the last backward
    syncs, so k - 1 of the k all-reduces go, and that saves at least `share` of the time
    per sample (both rows from `cost.measure`, k = `no_sync.accumulate`)."""
    k = no_sync.accumulate
    saved = 1 - no_sync.seconds_per_1000_samples / every_micro.seconds_per_1000_samples
    return verdict(
        k > 1 and every_micro.syncs == k * no_sync.syncs > 0 and saved >= share,
        f"{link_clock(link)}: accumulating micro-batches under no_sync makes k times fewer "
        "syncs than accumulating the same micro-batches without it (k micro-batches per "
        f"update), and takes at least {share:.0%} less time per sample",
        machine,
    )


@timing_claim(
    "named by its rows",
    "measurement",
    "test_overlap_saving_is_measured_and_its_verdict_fails_without_overlap",
)
def overlap_saves(result: dict, share: float = 0.5) -> Verdict:
    """Overlapping hides at least `share` of what it could: the shorter of the backward
    pass (the step's computation less its forward pass, which nothing can overlap) and the
    all-reduces of every bucket but the last, which cannot start before the backward pass
    ends (`result` from `overlap.overlap_saving`, on the real clock: not judged when other
    programs took the ranks' cores)."""
    could = result["hideable"]
    return verdict(
        could > 0 and result["saving"] >= share * could,
        f"{result['clock']}: overlapping the all-reduces with the backward pass "
        f"saves at least {share:.0%} of "
        "what it could hide (the shorter of the backward pass and the all-reduces of every "
        "bucket but the last, which cannot start before the backward pass ends), "
        "against computing first and then communicating",
        result.get("machine"),
    )


@timing_claim(
    "named by its rows",
    "physical bound",
    "test_a_hook_that_skips_the_wire_makes_an_impossible_step",
)
def overlap_physically_possible(result: dict, noise: float = 0.05) -> Verdict:
    """The overlapped step is no shorter than the computation, nor than the forward pass
    plus the communication (nothing is sent before the forward pass is done), less `noise`:
    a step that beat that would be a broken measurement, not a fast overlap."""
    floor = max(result["compute"], result.get("forward", 0.0) + result["communication"])
    return verdict(
        result["overlapped"] >= (1 - noise) * floor,
        f"{result['clock']}: the overlapped step is no shorter than the "
        f"computation, nor than the forward pass plus all the communication (less "
        f"{noise:.0%} for noise): the measurement is physically possible",
        result.get("machine"),
    )


def digest_spread(reports: list[dict]) -> float:
    """Largest gap between the ranks' parameter digests, relative to the digest's size."""
    digests = [r["parameter_digest"] for r in reports]
    scale = max(abs(v) for d in digests for v in d) or 1.0
    gaps = [abs(a - b) for d in digests[1:] for a, b in zip(digests[0], d, strict=True)]
    return max(gaps, default=0.0) / scale


def same_parameters(reports: list[dict], tolerance: float = 1e-6) -> Verdict:
    """Every rank's own digest of its final weights agrees (taken before any collective)."""
    return verdict(
        len(reports) > 1 and digest_spread(reports) <= tolerance,
        f"every node ends with the same parameters: their digests agree to {tolerance:g}",
    )


def samples_per_update(reports: list[dict]) -> float:
    """Samples the ranks' loaders yielded per update, all ranks together."""
    return sum(r["samples_per_update"] for r in reports)


def link_clock(link) -> str:
    """What a DDP timing over `link` (a `network` Link) is on: its compute is always
    measured; its wire is simulated unless the link is the real one."""
    return "simulated link, real compute" if link.emulated else "real clock"


@timing_claim(
    "named by its rows", "threshold", "test_the_twin_that_reduces_after_backward_shows_no_overlap"
)
def communication_overlaps_backward(traces: list[dict], link, share: float = 0.25) -> Verdict:
    """In the profiled step over `link`, on average over the ranks, all-reduces and backward
    ops ran at once for at least `share` of the shorter of the two (`trace.overlap_fraction`)."""
    mean = sum(t["overlap"] for t in traces) / len(traces) if traces else 0.0
    return verdict(
        mean >= share,
        f"{link_clock(link)}: the profiler shows all-reduces running during the backward pass "
        f"for at least {share:.0%} of the shorter of the two (mean over the ranks)",
    )


@timing_claim(
    "named by its rows", "schedule", "test_a_twin_that_forgets_no_sync_overlaps_after_all"
)
def none_overlaps_after_backward(traces: list[dict], link) -> Verdict:
    """The twin that issues its all-reduces once `backward()` has returned: the profiler
    must see none of them inside the backward pass, or it is not measuring what it says."""
    return verdict(
        bool(traces) and max(t["overlap"] for t in traces) == 0,
        f"{link_clock(link)}: issued after backward() returns, no all-reduce time falls inside "
        "the backward pass",
    )
