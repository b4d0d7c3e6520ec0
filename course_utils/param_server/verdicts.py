"""Notebook 07's claims as verdicts that can fail: what the runs agree on, how stale their
gradients are, what a straggler and a killed worker do, traffic and learning rates.

Each compares measured numbers with a stated threshold and prints one line; the tests
feed each one a case where the effect is absent, most of them a run of
`runs.run_parameter_server` without it (no straggler, no kill, the other mode).
"""

from __future__ import annotations

from statistics import median_low

from ..core.checks import Verdict, verdict
from ..core.timing_claims import timing_claim
from .runs import one_clock

# fp32: the three sum the same gradients in other orders, which moves the weights by
# rounding alone; an asynchronous server's stale gradients move them by 1e-3 and more
AGREEMENT = 1e-5


def sync_agrees_with_one_process(gap_ring: float, gap_serial: float) -> Verdict:
    """A synchronous server's weights within `AGREEMENT` of an allreduce's and of one
    process's with the joined batch (`gap_*`: the largest difference of a weight)."""
    return verdict(
        gap_ring < AGREEMENT and gap_serial < AGREEMENT,
        "a synchronous server, an allreduce and one process with the joined batch agree",
    )


def sync_never_stale(*runs) -> Verdict:
    """Every gradient each synchronous run applied was computed on the weights it updated."""
    return verdict(
        all(s == 0 for run in runs for s in run.staleness),
        "a synchronous server never applies a stale gradient",
    )


def async_about_workers_minus_one_stale(run, workers: int, slack: float = 0.5) -> Verdict:
    """With equal workers, each of the others' gradients lands between one worker's pull and
    its push: a mean staleness of workers - 1, within `slack` (half an update: the order in
    which equal workers arrive varies)."""
    mean = sum(run.staleness) / len(run.staleness)
    return verdict(
        abs(mean - (workers - 1)) < slack,
        "with equal asynchronous workers a gradient is about workers - 1 updates stale",
    )


def straggler_far_staler(run, straggler: int, workers: int, factor: float = 3.0) -> Verdict:
    """The straggler's median staleness at least `factor` x the fast workers' (and x 1):
    while it computes one gradient, the others push several. Of two middle values the lower,
    as `torch.median` takes."""
    fast = [s for w in range(1, workers + 1) if w != straggler for s in run.staleness_of(w)]
    slow = run.staleness_of(straggler)  # empty if it delivered nothing: nothing to compare
    return verdict(
        bool(slow) and median_low(slow) >= factor * max(median_low(fast), 1),
        "the straggler's gradients are far staler than the fast workers'",
    )


@timing_claim(
    "named by its rows",
    "measurement",
    "test_a_straggler_slows_the_synchronous_server_only_when_there_is_one",
)
def straggler_slows_sync(sync_run, async_run, factor: float = 2.0) -> Verdict:
    """The synchronous run with a straggler takes over `factor` x the asynchronous one's
    time for the same gradients: each of its updates waits for the slowest worker. Every
    profile's straggler delay outlasts a synchronous update without it, so that each update
    takes over twice as long, while the asynchronous server loses only the straggler's
    share of the gradients. Both runs must be on one clock, which the line names."""
    clock = one_clock([sync_run, async_run])
    return verdict(
        sync_run.seconds > factor * async_run.seconds,
        f"{clock} clock: with a straggler, the synchronous server takes more than twice as long",
    )


def async_survives_a_lost_worker(run, updates: int, killed: int, drop: float = 0.3) -> Verdict:
    """The asynchronous run applied all `updates`, its test loss fell by more than `drop`,
    and its server named the killed worker as lost, and no other."""
    return verdict(
        run.updates == updates and run.final_loss < run.loss[0] - drop
        and set(run.lost) == {killed},
        "asynchronous training applied every update and kept learning without the dead "
        "worker, which its server named, and only it",
    )  # fmt: skip


def sync_names_the_lost_worker(error, cfg, killed: int) -> Verdict:
    """`error`, what the synchronous run raised (None: it finished), is a WorkerLost for the
    killed worker's rank, and names the worker."""
    return verdict(
        error is not None
        and error.rank == cfg.rank_of(killed)
        and f"worker {killed}" in str(error),
        "the synchronous server raised param_server.WorkerLost naming the killed worker",
    )


def server_grows_ring_levels_off(
    workers, server_bytes, ring_bytes, tolerance: float = 0.1, share: float = 0.8
) -> Verdict:
    """The server's bytes per update, relative to the fewest workers', track the workers'
    ratio within `tolerance` at every count measured; from the fewest ranks to the most, the
    busiest ring rank's bytes grow by less than `share` x the growth of the number of ranks."""
    grows = all(
        abs((b / server_bytes[0]) / (n / workers[0]) - 1) <= tolerance
        for n, b in zip(workers, server_bytes, strict=True)
    )
    levels_off = ring_bytes[-1] / ring_bytes[0] < share * workers[-1] / workers[0]
    return verdict(
        grows and levels_off,
        f"the server's bytes per update grow in proportion to its workers (within "
        f"{tolerance:.0%}), while the busiest allreduce rank's grow less than {share:g} x as "
        "fast: they level off below a bound",
    )


def async_needs_smaller_lr(chosen: dict[str, float]) -> Verdict:
    """The rate chosen on validation for asynchronous SGD is below synchronous SGD's."""
    return verdict(
        chosen["asynchronous"] < chosen["synchronous"],
        "on validation loss, asynchronous SGD's best learning rate is smaller than "
        "synchronous SGD's",
    )


def async_breaks_at_sync_rate(
    lrs, val_loss: dict[str, list[float]], chosen: dict, gap: float = 0.2
) -> Verdict:
    """At synchronous SGD's chosen rate, asynchronous SGD's mean validation loss is more
    than `gap` above both synchronous SGD's and a lone worker's."""
    at = list(lrs).index(chosen["synchronous"])
    loss = {method: values[at] for method, values in val_loss.items()}
    ok = loss["asynchronous"] > max(loss["synchronous"], loss["one worker alone"]) + gap
    return verdict(
        ok,
        f"at synchronous SGD's chosen rate, asynchronous SGD's validation loss is more than "
        f"{gap:g} above synchronous SGD's and a lone worker's",
    )


# --- parameter averaging (local SGD) ---------------------------------------------------------

# Test accuracy, on MNIST-1D's 10 classes. Averaging less often may cost a little: "keeps up"
# allows 6 points below averaging every step. An average of replicas that drifted apart
# (different starts) falls toward chance, 10%: "far worse" asks for 20 points below the worst
# of the replicas it averaged.
KEEPS_UP = 0.06
FAR_WORSE = 0.2


def infrequent_averaging_keeps_up(accuracy_by_period: dict) -> Verdict:
    """`accuracy_by_period`: the averaged model's test accuracy for each averaging period H;
    every one within `KEEPS_UP` of the shortest period's (H = 1: every step)."""
    every_step = accuracy_by_period[min(accuracy_by_period)]
    return verdict(
        all(a > every_step - KEEPS_UP for a in accuracy_by_period.values()),
        f"averaging every H steps stays within {100 * KEEPS_UP:g} points of averaging every step",
    )


def one_average_beats_a_worker(averaged: float, alone: list[float]) -> Verdict:
    """One average of replicas trained from one start, against their mean accuracy alone."""
    return verdict(
        averaged >= sum(alone) / len(alone),
        "one average after training from one start beats the average worker alone",
    )


def different_starts_average_far_worse(averaged: float, alone: list[float]) -> Verdict:
    """One average of replicas trained from different starts, `FAR_WORSE` below the worst."""
    return verdict(
        averaged < min(alone) - FAR_WORSE,
        "averaging models that started from different weights is far worse than each of them",
    )
