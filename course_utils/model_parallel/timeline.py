"""What one pipeline step looked like: when every stage computed and waited.

A measured run (`virtual_pipeline`) and a play-out on paper (`schedule_play`) both give a
`Timeline` of `Event`s, so a measured step can be held against what its schedule promises,
read the same way: its makespan, each stage's busy and idle time, the bubble.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ..parallel.pipeline import BACKWARD, FORWARD

WAIT = "wait"


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

    def median_op(self, kind: str, stage: int | None = None) -> float:
        """The median duration of the ops of `kind` (on `stage`, or on any), 0 if none ran."""
        times = [e.end - e.start for e in self.compute(stage) if e.kind == kind]
        return statistics.median(times) if times else 0.0

    def op_seconds(self) -> list[tuple[float, float]]:
        """Each stage's median forward and median backward: what `simulate(durations=...)`
        takes to predict a step from measured stages."""
        return [
            (self.median_op(FORWARD, s), self.median_op(BACKWARD, s)) for s in range(self.stages)
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
