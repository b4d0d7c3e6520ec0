"""Pipeline schedules: in which order each rank runs its forwards and backwards.

A schedule turns (stage, stages, microbatches) into a list of ops, ("F", i) or ("B", i) for
micro-batch i: naive, GPipe and 1F1B. Past 1F1B an op is (kind, micro-batch, chunk). `chunk`
is the virtual stage on the rank: with v chunks per rank the model is cut into K·v pieces
and rank r holds pieces r, r + K, r + 2K, ... (interleaved 1F1B, Narayanan et al. 2021), so
a micro-batch crosses every rank v times on its way forward. Kinds are "F", "B" and "W": a
schedule with W ops splits each backward into B, the gradient of the chunk's input that the
previous stage waits for, and W, the gradient of its weights that nobody waits for (ZB-H1,
Qi et al. 2023), so W can fill the pipeline's idle slots; without W ops each B is the whole
backward. `plan` names every schedule, naive to ZB-H1, as one `Plan`. The same orders drive
the real pipeline (`virtual_pipeline`) and the play-out on paper (`schedule_play`), so a
measured step can be held against what its schedule promises, and a learner's own order
can be tried without starting a single process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..core.own_answers import own_answer
from ..parallel.pipeline import BACKWARD, FORWARD, WEIGHT
from .schedule_check import Op as ChunkOp
from .schedule_check import check_rank_order

Op = tuple[str, int]  # ("F", i) or ("B", i): an op of a one-chunk schedule


@own_answer("gpipe_order")
def gpipe_order(stage: int, stages: int, microbatches: int) -> list[Op]:
    """Every forward, then every backward, newest micro-batch first (GPipe, Huang et al. 2019)."""
    forwards = [(FORWARD, i) for i in range(microbatches)]
    return forwards + [(BACKWARD, i) for i in reversed(range(microbatches))]


def one_f_one_b_order(stage: int, stages: int, microbatches: int) -> list[Op]:
    """Fill the pipe, then alternate one forward and one backward (PipeDream-flush's 1F1B).

    A stage runs only as many forwards ahead as there are stages after it, so it never holds
    the activations of more than `stages - stage` micro-batches, whatever `microbatches` is.
    """
    warmup = min(stages - stage - 1, microbatches)
    ops = [(FORWARD, i) for i in range(warmup)]
    for i in range(microbatches - warmup):
        ops += [(FORWARD, warmup + i), (BACKWARD, i)]
    return ops + [(BACKWARD, i) for i in range(microbatches - warmup, microbatches)]


SCHEDULES = ("naive", "gpipe", "1f1b")  # one chunk, a whole backward: what `run_pipeline` runs


def check_order(order, microbatches: int, stage: int = 0) -> list[Op]:
    """Refuse an order that could not train: each micro-batch once forward, then once
    backward (`schedule_check.check_rank_order` for one chunk, with no split backward)."""
    ops = check_rank_order(order, microbatches, rank=stage)
    if any(kind == WEIGHT for kind, _, _ in ops):
        raise ValueError(f"rank {stage}: W ops split the backward: zero-bubble schedules only.")
    return [(kind, i) for kind, i, _ in ops]


@own_answer("bubble formula")
def bubble_formula(stages: int, microbatches: int) -> float:
    """GPipe's idle fraction (K-1)/(M+K-1): the pipe fills and drains once per batch."""
    return (stages - 1) / (microbatches + stages - 1)


def lifted(order: list[tuple[str, int]]) -> list[ChunkOp]:
    """A one-chunk order of ("F", i) / ("B", i) ops as (kind, i, 0)."""
    return [(kind, i, 0) for kind, i in order]


def _rounds(stages: int, microbatches: int) -> int:
    """Micro-batches per round: forwards go K at a time through one chunk, then the next
    chunk (PyTorch's rule, which also allows M that is not a multiple of K)."""
    rounds = max(1, microbatches // stages)
    if microbatches % rounds:
        raise ValueError(
            f"interleaving needs M to be a multiple of M // K = {rounds} (got M={microbatches}, "
            f"K={stages}); use M = {rounds * (microbatches // rounds)} or a multiple of K."
        )
    return microbatches // rounds


@own_answer("interleaved_order")
def interleaved_order(rank: int, stages: int, microbatches: int, chunks: int = 2) -> list[ChunkOp]:
    """Interleaved 1F1B for one rank: a round of micro-batches forward through chunk 0, then
    the same round through chunk 1, ...; backwards go through the chunks the other way.

    The warm-up is longer than 1F1B's ((v-1) rounds plus 2 per rank after this one), then
    one forward and one backward alternate. Each chunk is 1/v of a stage, so the pipe fills
    v times faster and the bubble shrinks to (K-1)/(v·M+K-1) of the step.
    """
    if chunks < 1:
        raise ValueError(f"chunks (virtual stages per rank) must be at least 1, got {chunks}.")
    per_round, total = _rounds(stages, microbatches), chunks * microbatches
    warmup = min((chunks - 1) * per_round + 2 * (stages - 1 - rank), total)
    done = {FORWARD: [0] * chunks, BACKWARD: [0] * chunks}
    ops: list[ChunkOp] = []

    def run(kind: str, n: int) -> None:
        step = (n // per_round) % chunks
        chunk = step if kind == FORWARD else chunks - 1 - step
        ops.append((kind, done[kind][chunk], chunk))
        done[kind][chunk] += 1

    for n in range(warmup):
        run(FORWARD, n)
    for n in range(total - warmup):
        run(FORWARD, warmup + n)
        run(BACKWARD, n)
    for n in range(total - warmup, total):
        run(BACKWARD, n)
    return ops


def zb_h1_order(rank: int, stages: int, microbatches: int) -> list[ChunkOp]:
    """ZB-H1 for one rank: 1F1B's forwards and input-gradient backwards (B), each weight
    gradient (W) run after its B, rank r keeping r of them back for the end.

    The last ranks, which 1F1B leaves idle while the first ones finish, fill that time with
    their deferred Ws; a rank holds a micro-batch from its F to its W, so rank r holds at most
    (K - r) + r = K, 1F1B's peak on rank 0. With F, B and W of equal length the bubble is a
    third of 1F1B's: (K-1)(F+B-W) instead of (K-1)(F+B+W) per rank.
    """
    warmup = min(stages - 1 - rank, microbatches)
    ops: list[ChunkOp] = [(FORWARD, i, 0) for i in range(warmup)]
    weights = 0
    for n in range(microbatches):
        if n < microbatches - warmup:
            ops.append((FORWARD, warmup + n, 0))
        ops.append((BACKWARD, n, 0))
        if n >= rank:
            ops.append((WEIGHT, weights, 0))
            weights += 1
    return ops + [(WEIGHT, i, 0) for i in range(weights, microbatches)]


@dataclass(frozen=True)
class Plan:
    """A schedule for the whole pipeline: its name, chunks per rank, how to order a rank, and
    whether a rank holds its results until a run of forwards (or backwards) is done."""

    name: str
    chunks: int
    order: Callable[[int, int, int], list[ChunkOp]]  # (rank, stages, microbatches) -> ops
    hold_sends: bool = False  # naive: the whole batch is passed on at once

    def orders(self, stages: int, microbatches: int) -> list[list[ChunkOp]]:
        return [self.order(r, stages, microbatches) for r in range(stages)]


def _lifted_order(order: Callable[[int, int, int], list[Op]]):
    """A one-chunk schedule's order function, its ops lifted to (kind, i, 0)."""
    return lambda r, k, m: lifted(order(r, k, m))


def plan(name: str | Plan, chunks: int = 2) -> Plan:
    """The schedule called `name`; `chunks` (v) matters only for "interleaved"."""
    if isinstance(name, Plan):
        return name
    plans = {
        # naive runs GPipe's ops, but the batch goes through one stage at a time: each stage
        # passes on all its results at once (no pipelining)
        "naive": Plan("naive", 1, _lifted_order(gpipe_order), hold_sends=True),
        "gpipe": Plan("gpipe", 1, _lifted_order(gpipe_order)),
        "1f1b": Plan("1f1b", 1, _lifted_order(one_f_one_b_order)),
        "interleaved": Plan(
            "interleaved", chunks, lambda r, k, m: interleaved_order(r, k, m, chunks)
        ),
        "zb-h1": Plan("zb-h1", 1, zb_h1_order),  # 1F1B with each backward split in B and W
    }
    if name not in plans:
        raise ValueError(f"unknown schedule {name!r}; choose one of {', '.join(plans)}.")
    return plans[name]


NAMES = ("gpipe", "1f1b", "interleaved", "zb-h1")


def one_chunk(name: str | Plan) -> Plan:
    """The schedule `name`, refused unless it runs one chunk per rank with a whole backward:
    what `virtual_pipeline.run_pipeline` and `schedule_play.simulate` take."""
    sched = plan(name, 1)
    if sched.name not in SCHEDULES:
        raise ValueError(
            f"{sched.name} needs chunks or a split backward: choose one of "
            f"{', '.join(SCHEDULES)} here; play it out with `play_out`, train it with "
            "`train_pipeline`."
        )
    return sched


def interleaved_bubble_formula(stages: int, microbatches: int, chunks: int) -> float:
    """(K-1)/(v·M+K-1): the pipe fills and drains once, in steps 1/v of a stage long."""
    return (stages - 1) / (chunks * microbatches + stages - 1)


def zb_h1_bubble_formula(stages: int, microbatches: int, f=1.0, b=1.0, w=1.0) -> float:
    """Qi et al.'s ZB-H1: each rank idles (K-1)(F+B-W) in a step of M(F+B+W) work."""
    idle = (stages - 1) * (f + b - w)
    return idle / (microbatches * (f + b + w) + idle)


def handoffs_per_step(stages: int, microbatches: int, chunks: int = 1) -> int:
    """Messages between ranks in one step: each micro-batch crosses the K·v - 1 cuts
    between pieces twice (activation forward, gradient back): (K·v-1)/(K-1) times 1F1B's,
    at least v times (with v chunks it also goes from the last rank back to the first)."""
    return 2 * microbatches * (stages * chunks - 1)


def peak_held(order: list) -> int:
    """Most pieces whose activations a stage keeps at once: from F to the B that ends them,
    or to the W when the backward is split (W needs the piece's inputs). Ops are (kind, i)
    or (kind, i, chunk)."""
    ends = WEIGHT if any(op[0] == WEIGHT for op in order) else BACKWARD
    held = peak = 0
    for kind, *_ in order:
        held += 1 if kind == FORWARD else -1 if kind == ends else 0
        peak = max(peak, held)
    return peak
