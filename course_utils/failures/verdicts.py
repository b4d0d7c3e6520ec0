"""The chapter's claims, each a measured quantity against a stated threshold.

Every function prints one verdict line with no run-to-run number in it and returns it;
the tests feed each one a case where the effect is absent.
"""

from __future__ import annotations

import math

from ..core.checks import MachineShare, Verdict, verdict
from ..core.timing_claims import timing_claim


def resume_is_exact(run) -> Verdict:
    """`run` is a `ResumeRun`: losses from the checkpoint on, and every rank's final weights."""
    digests = set(run.digests.get("full", [])) | set(run.digests.get("resumed", []))
    return verdict(
        run.tail_equal() and len(digests) == 1,
        "the resumed run's losses and final parameters equal the uninterrupted run's, bit for bit",
    )


def resumed_from_last_checkpoint(run) -> Verdict:
    last = (run.kill_at // run.every) * run.every
    return verdict(
        run.resumed_from == last,
        "the run resumed from the last checkpoint before the kill, no earlier",
    )


@timing_claim("real", "measurement", "test_youngs_formula_and_its_verdict")
def young_agrees(
    lost: dict, young_steps: float, slack: float = 0.2, machine: MachineShare | None = None
) -> Verdict:
    """Saving at Young's interval (the k measured nearest to it) loses at most `slack` more
    than the best k. `lost` comes from failures replayed on measured runs (`young`), not
    from Young's formula. Near its minimum the curve is flat, so this, not the argmin, is
    what measurement noise leaves stable. `machine`: the share the runs were timed in."""
    nearest = min(lost, key=lambda k: abs(math.log(k / young_steps)))
    return verdict(
        lost[nearest] <= (1 + slack) * min(lost.values()),
        f"real clock: saving at Young's √(2·C·M) loses at most {slack:.0%} more than the best "
        "interval, with random failures replayed on the measured runs",
        machine=machine,
    )


def checkpoint_sharded(run: dict, slack: float = 0.25) -> Verdict:
    """`run` is `reshard`'s. At each world size N, every parameter lay in N pieces, one per
    rank's file, each file held 1/N of the parameters (within `slack`) and all together each
    element once; and the ranks that loaded held other shards than those that saved. A DDP
    checkpoint fails it: DCP writes each replicated tensor whole, in one rank's file."""
    saved_by, loaded_by = run["world_sizes"]
    even = all(
        set(layout["pieces"].values()) == {n}
        and abs(sum(layout["shares"].values()) - 1) < 1e-9
        and all(abs(share * n - 1) <= slack for share in layout["shares"].values())
        for n, layout in run["stored"].items()
    )
    before, after = run["shards"][saved_by][0], run["shards"][loaded_by][0]
    moved = bool(before) and all(before[name] != after.get(name) for name in before)
    return verdict(
        even and moved and set(run["stored"]) == {saved_by, loaded_by},
        f"each of {saved_by} ranks stored its own rows of every parameter, about 1/{saved_by} "
        f"of them, and each of {loaded_by} about 1/{loaded_by} (within {slack:.0%}); the "
        f"{loaded_by} ranks held other rows than the {saved_by}",
    )


def reshard_matches(run: dict, tolerance: float = 1e-12) -> Verdict:
    """`run` is `reshard`'s: the resumed run's final weights against one unsharded process's
    (float64: the order of the sums differs, and float64 rounds at about 1e-16)."""
    saved_by, loaded_by = run["world_sizes"]
    return verdict(
        run["gap"] <= tolerance,
        f"{loaded_by} ranks went on from {saved_by} ranks' sharded checkpoint and ended where "
        f"one unsharded process did, to within {tolerance:g} (float64)",
    )


def elastic_recovered(ranks: list[dict], twin_digest: str, resumed_from: int) -> Verdict:
    return verdict(
        bool(ranks)
        and all(r["digest"] == twin_digest and r["start"] == resumed_from for r in ranks),
        "after the agents restarted the group, it resumed from the checkpoint and ended with "
        "an uninterrupted run's parameters",
    )


def agent_restarted(lines: list[str], nodes: int) -> Verdict:
    """An agent saw its worker SIGKILLed (exit code -9), and every node's agent restarted:
    for its own worker's failure, or because a peer came back to the rendezvous."""
    restarted = {line.split("]")[0] for line in lines if "will restart" in line}
    return verdict(
        any("exitcode: -9" in line for line in lines) and len(restarted) == nodes,
        "an agent reported its worker killed, and every node's agent restarted its workers",
    )


def hang_found(report: dict, rank: int, function: str) -> Verdict:
    return verdict(
        report["barrier_names"] == [rank]
        and report["launcher_names"] == rank
        and function in report["where"],
        "monitored_barrier named the hung rank, and the stack dump shows the function it was in",
    )


@timing_claim("real", "measurement", "test_a_run_where_no_rank_is_slowed_has_no_straggler")
def straggler_found(
    table: dict, rank: int, ratio: float = 3.0, machine: MachineShare | None = None
) -> Verdict:
    """The slowest worker is `rank`, with more than `ratio` times the median rank's work
    (wall times: `machine` is what other programs took of the ranks' cores meanwhile)."""
    work = {r: t["work"] for r, t in table.items()}
    others = sorted(w for r, w in work.items() if r != rank)
    median = others[len(others) // 2] if others else 0.0
    return verdict(
        max(work, key=work.get) == rank and work[rank] > ratio * median,
        f"real clock: the rank that does more than {ratio:g}x the others' work per update is "
        "the slow one",
        machine=machine,
    )


@timing_claim("real", "measurement", "test_ranks_that_never_average_their_gradients_do_not_wait")
def job_waits_for_straggler(
    table: dict, rank: int, share: float = 0.9, machine: MachineShare | None = None
) -> Verdict:
    """Every rank's update lasts at least `share` of the slow rank's work."""
    slow = table[rank]["work"]
    return verdict(
        all(t["step"] >= share * slow for t in table.values()),
        "real clock: every rank's update lasts as long as the slow rank's work: the whole job "
        "waits",
        machine=machine,
    )


def culprit_found(found: dict | None, kind: str | None, rank: int | None) -> Verdict:
    """The first disagreement is of `kind` on `rank` (None, None: there must be none)."""
    if kind is None:
        return verdict(found is None, "in a healthy run every check agrees across the ranks")
    return verdict(
        found is not None and found["kind"] == kind and found["rank"] == rank,
        f"the cross-rank check named the rank whose {kind} differ",
    )
