"""DDP over the simulated link: buckets that queue on the rank's wire.

A communication hook (`ddp.wire.on_link_hook`) runs each bucket's all-reduce for real,
and `deliver_after` hands it back to DDP only when its bytes would have left this
rank's wire. A daemon thread waits for that, so the backward pass goes on meanwhile and
later buckets queue behind earlier ones, as on a real network card. Each bucket's time on
the wire shows in a `torch.profiler` trace (with `profile_all_threads`) as `WIRE_EVENT`.
"""

from __future__ import annotations

import queue
import threading
import time

import torch

from .wire import waited_until

WIRE_EVENT = "emulated link: all-reduce on the wire"


class _Wire(threading.Thread):
    """Completes each bucket's future once its allreduce is done and its wire time is over."""

    def __init__(self):
        super().__init__(daemon=True, name="emulated-link")
        self.jobs: queue.Queue = queue.Queue()

    def run(self) -> None:
        while True:
            deadline, work, out = self.jobs.get()
            try:
                with torch.profiler.record_function(WIRE_EVENT):
                    value = work.wait()
                    left = deadline - time.perf_counter()
                    if left > 0:
                        time.sleep(left)
                out.set_result(value[0] if isinstance(value, list) else value)
            except Exception as error:  # noqa: BLE001 - handed to the waiting DDP
                out.set_exception(error)


_wire: list[_Wire] = []


def _wire_thread() -> _Wire:
    if not _wire or not _wire[0].is_alive():
        _wire[:] = [_Wire()]
        _wire[0].start()
    return _wire[0]


_last_deadline = [0.0]


def deliver_after(deadline: float, work: torch.futures.Future) -> torch.futures.Future:
    """A future with `work`'s value (its first tensor), set no earlier than `deadline`."""
    out = torch.futures.Future()
    _last_deadline[0] = max(_last_deadline[0], deadline)
    _wire_thread().jobs.put((deadline, work, out))
    return out


def waited_for_every_bucket() -> None:
    """Call on the rank's own thread once DDP's backward has returned (it blocks until
    every bucket is back): the rank's clock moves to the last bucket's deadline, so what it
    computes next is not stamped at a time from before that wait. (The wire thread must
    not do it: while buckets come back, the backward pass is still computing.)"""
    waited_until(_last_deadline[0])
