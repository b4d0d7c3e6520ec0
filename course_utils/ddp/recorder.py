"""What DDP's comm hook saw during each update: every all-reduce's start and end, per bucket.

`cost` times DDP steps with it and `overlap_timeline` draws one backward pass from it. An
update may all-reduce more than once (gradient accumulation without `no_sync` syncs after
every micro-batch), so an update's communication is the sum over its backward passes of
each pass's span, from its first bucket's start to its last bucket's end: a span over the
whole update would count the micro-batches' compute in between as communication.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..network.hook import waited_for_every_bucket


@dataclass
class Recorder:
    """The comm hook's state: the real hook, (start, end, bucket, bytes) per all-reduce of the
    update under way, and per finished update its communication span and its syncs (the
    backward passes whose gradients were all-reduced)."""

    inner: object
    events: list = field(default_factory=list)
    spans: list[float] = field(default_factory=list)
    syncs: list[int] = field(default_factory=list)
    buckets: int = 0

    def close_update(self, model=None) -> None:
        """train's after_backward: DDP's backward has waited for every all-reduce by now."""
        waited_for_every_bucket()
        passes = by_backward_pass(self.events)
        if passes:
            self.buckets = len(passes[0])
        self.spans.append(sum(max(e[1] for e in p) - min(e[0] for e in p) for p in passes))
        self.syncs.append(len(passes))
        self.events.clear()


def by_backward_pass(events: list) -> list[list]:
    """The all-reduces of one update, grouped by the backward pass that issued them: each
    pass all-reduces every bucket once, so in order of start they come one bucket set at a
    time."""
    buckets = len({e[2] for e in events})
    ordered = sorted(events)
    return [ordered[i : i + buckets] for i in range(0, len(ordered), buckets)] if buckets else []


def recording_hook(recorder: Recorder, bucket):
    """Run the real hook (default group) and note when its all-reduce starts and completes."""
    start = time.perf_counter()
    future = recorder.inner(None, bucket)
    nbytes = bucket.buffer().numel() * bucket.buffer().element_size()
    index = bucket.index()

    def finished(fut):
        recorder.events.append((start, time.perf_counter(), index, nbytes))
        return fut.value()

    return future.then(finished)
