"""Pipeline schedules: in which order each stage runs its forwards and backwards, and the cost.

A schedule turns (stage, stages, microbatches) into a list of ops, ("F", i) or ("B", i) for
micro-batch i. The same lists drive the real pipeline (`virtual_pipeline`) and the play-out on
paper (`schedule_play`), so that a measured timeline can be held against what the schedule
promises, and a learner's own order can be tried without starting a single process. A
`Timeline` is what both give back: every op's start and end on every stage.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ..core.own_answers import own_answer
from ..parallel.pipeline import BACKWARD, FORWARD, WEIGHT
from .schedule_check import check_rank_order

WAIT = "wait"
Op = tuple[str, int]


def naive_order(stage: int, stages: int, microbatches: int) -> list[Op]:
    """Same ops as GPipe; what makes it naive is that the whole batch is passed on at once."""
    return gpipe_order(stage, stages, microbatches)


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


@dataclass(frozen=True)
class Event:
    stage: int
    kind: str  # "F", "B" or "wait"
    microbatch: int  # -1 for a wait
    start: float
    end: float
    chunk: int = 0  # the rank's virtual stage (interleaved schedules)


@dataclass
class Timeline:
    """When every stage computed and waited during one training step.

    Times are in seconds from a start shared by all stages (measured) or in slots
    (simulated, `slot=1`); `slot` is the duration of one ideal forward, to count in slots.
    """

    schedule: str
    stages: int
    microbatches: int
    events: list[Event]
    slot: float = 1.0
    peak_activations: tuple[int, ...] = field(default_factory=tuple)
    peak_bytes: tuple[int, ...] = field(default_factory=tuple)  # measured runs only

    def compute(self, stage: int | None = None) -> list[Event]:
        return [e for e in self.events if e.kind != WAIT and (stage is None or e.stage == stage)]

    def makespan(self) -> float:
        """From the first op that started to the last that ended, on any stage."""
        ops = self.compute()
        return max(e.end for e in ops) - min(e.start for e in ops)

    def busy(self, stage: int) -> float:
        return sum(e.end - e.start for e in self.compute(stage))

    def op_seconds(self) -> list[tuple[float, float]]:
        """Each stage's median forward and median backward: what `simulate(durations=...)`
        takes to predict a step from measured stages."""
        return [
            tuple(
                statistics.median(e.end - e.start for e in self.compute(s) if e.kind == kind)
                for kind in (FORWARD, BACKWARD)
            )
            for s in range(self.stages)
        ]

    def step_over_work(self) -> float:
        """The step over the work one stage does in it (its mean busy time): (M+K-1)/M for
        GPipe or 1F1B with equal stages and free hand-offs, whatever an op costs, so that a
        schedule whose ops run a little faster or slower (or a machine that does) compares
        fairly with another."""
        return self.makespan() / (sum(map(self.busy, range(self.stages))) / self.stages)

    def op_durations(self) -> dict[tuple[int, str, int, int], float]:
        """Every op's own duration, by (stage, kind, micro-batch, chunk): what `play_out` and
        `simulate` take as `per_op`, so that an op the machine slowed is slow in both."""
        return {(e.stage, e.kind, e.microbatch, e.chunk): e.end - e.start for e in self.compute()}

    def idle(self, stage: int) -> float:
        """How long `stage` sat idle during the step. A measured run records each wait for a
        hand-off: idle is those waits, plus the time before the stage's first op and after
        its last; the CPU time spent handing results on between ops is not idle. A run played
        out on paper records no waits: all its time outside the ops is idle."""
        ops = self.compute(stage)
        waits = [e for e in self.events if e.kind == WAIT and e.stage == stage]
        if not waits:
            return self.makespan() - self.busy(stage)
        start, end = min(e.start for e in self.compute()), max(e.end for e in self.compute())
        first, last = min(e.start for e in ops), max(e.end for e in ops)
        waited = sum(e.end - e.start for e in waits if e.start >= first)
        return (first - start) + waited + (end - last)

    def bubble_fraction(self) -> float:
        """Share of the stages' time spent idle (`idle`) over the step: GPipe's bubble."""
        idle = sum(self.idle(s) for s in range(self.stages))
        return idle / (self.stages * self.makespan())

    def span(self, kind: str) -> float:
        """How long the step took until the last op of `kind` ended, e.g. the forward pass."""
        start = min(e.start for e in self.compute())
        return max(e.end for e in self.compute() if e.kind == kind) - start

    def in_slots(self, seconds: float) -> float:
        return seconds / self.slot


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
