"""Whether a measurement on the real clock was given the machine it needed.

A wall-clock verdict ("two trials side by side finish in little more than one") is only
about the course's code if nothing else took the cores it ran on. So a real-clock
measurement runs inside `watch`, which counts the CPU time spent on the cores this process
may run on (`psutil.cpu_times`, steal included: a neighbour on the same host) against that of
this process and every process it started (`os.times` counts the children it reaped,
psutil the ones still running). What is left is what other programs took, in cores: a
CPU hog on a 2-core machine shows as 1.0. The measurement declares how many cores it
needs; it was given the machine when the others used no more than the cores it left free,
plus `ALLOWANCE` for a browser, a terminal and the notebook server.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass

import psutil

ALLOWANCE = 0.25  # cores other programs may use beyond those the measurement left free
ATTEMPTS = 3  # measurements of a busy machine before it is left "not judged"
QUIET_WAIT = 3.0  # seconds to wait for other programs to free the cores before measuring again


@dataclass(frozen=True)
class MachineShare:
    """What other programs took while a measurement of `cores` cores ran for `seconds`."""

    cores: int  # cores the measurement needs: one per rank, per trial, per busy thread
    seconds: float
    others_cores: float  # mean cores busy with programs other than this one and its children
    machine_cores: int

    @property
    def spare_cores(self) -> float:
        """Cores the measurement left to others before they slowed it down."""
        return max(0, self.machine_cores - self.cores) + ALLOWANCE

    @property
    def busy(self) -> bool:
        return self.others_cores > self.spare_cores

    def __str__(self) -> str:
        return (
            f"other programs used {self.others_cores:.2f} of the {self.machine_cores} cores "
            f"while this needed {self.cores} ({self.spare_cores:.2f} would not slow it)"
        )


def machine_cores() -> int:
    """The cores this process may run on (a container's or a task set's, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def _machine_busy_seconds() -> float:
    """Busy CPU seconds of the cores this process may run on, whoever used them.

    On a shared host (a JupyterHub pod pinned to a few of its cores) the other cores'
    tenants do not slow this process down, so only its own cores count.
    """
    return sum(_busy(t) for t in _own_cores_times())


def _own_cores_times() -> list:
    per_cpu = psutil.cpu_times(percpu=True)
    try:
        mine = sorted(os.sched_getaffinity(0))
    except AttributeError:  # macOS: no pinning, every core is this process's
        return per_cpu
    if not per_cpu or mine[-1] >= len(per_cpu):  # offline cores renumber the list
        return [psutil.cpu_times()]
    return [per_cpu[i] for i in mine]


def _busy(t) -> float:
    idle = t.idle + getattr(t, "iowait", 0.0)
    guests = getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)  # counted in user too
    return sum(t) - idle - guests


def _own_seconds() -> tuple[float, dict[int, float]]:
    """CPU time of this process and the children it reaped, and of each descendant still alive
    with the children that descendant reaped: a forkserver's ranks are reaped by the server,
    not by this process, and without the server's share they counted as other programs (1.8
    of 2 cores while 2 ranks spun under forkserver, 0.0 under fork)."""
    t = os.times()
    alive = {}
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            c = child.cpu_times()
            alive[child.pid] = c.user + c.system + c.children_user + c.children_system
    return t.user + t.system + t.children_user + t.children_system, alive


class watch:
    """`with watch(cores=2) as w: ...`, then `w.share`: what others took meanwhile."""

    def __init__(self, cores: int):
        if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
            raise ValueError(f"cores must be a whole number >= 1, got {cores!r}.")
        self.cores = cores
        self.share: MachineShare | None = None

    def __enter__(self) -> watch:
        self._busy = _machine_busy_seconds()
        self._own, self._alive = _own_seconds()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        seconds = time.perf_counter() - self._start
        own, alive = _own_seconds()
        # a descendant alive at both ends counts its difference; one that ended was reaped
        # (its whole time is in `own`), so its time before the start comes off again
        ours = own - self._own + sum(alive.values()) - sum(self._alive.values())
        others = _machine_busy_seconds() - self._busy - ours
        self.share = MachineShare(
            cores=self.cores,
            seconds=seconds,
            others_cores=max(0.0, others / seconds) if seconds > 0 else 0.0,
            machine_cores=machine_cores(),
        )


def busiest(*shares: MachineShare) -> MachineShare:
    """The share to judge a claim that compares several measurements by: a busy one if any."""
    return next((s for s in shares if s.busy), shares[-1])


def on_a_quiet_machine(measure, cores: int, attempts: int = ATTEMPTS):
    """`measure()` watched, and again while other programs took the cores it needed, at most
    `attempts` times in all: its last value and the machine's share during it.

    Before measuring again it waits for a quiet moment (`quiet_soon`): a program that keeps
    the cores busy, a CPU hog or another lab's job, would make every repeat busy too.
    """
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"attempts must be a whole number >= 1, got {attempts!r}.")
    for attempt in range(attempts):
        with watch(cores) as w:
            value = measure()
        if not w.share.busy:
            break
        again = attempt + 1 < attempts and quiet_soon(cores)
        print(f"busy machine: {w.share}; {'measuring again' if again else 'not judged'}")
        if not again:
            break
    return value, w.share


def quiet_soon(cores: int, within: float = QUIET_WAIT, window: float = 0.5) -> bool:
    """Whether other programs leave `cores` cores free for one `window` within `within` s."""
    for _ in range(max(1, round(within / window))):
        with watch(cores) as w:
            time.sleep(window)
        if not w.share.busy:
            return True
    return False
