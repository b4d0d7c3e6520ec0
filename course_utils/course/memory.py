"""The peak memory of a notebook's kernel and its ranks, for sizing a JupyterHub.

What a learner needs is the most that the kernel and every process it started held at
once. Forked ranks share most of their pages with the kernel, so adding up resident
sizes would count those pages N+1 times; PSS (proportional set size) splits each shared
page among the processes that share it, so the sum over the tree is the memory it
really takes. It is sampled in a thread while the notebook runs, at most a few times a
second and never for more than `SAMPLING_SHARE` of a core: reading a big process's page
map takes tens of milliseconds, and sampled four times a second the sampler alone took
0.28 of a core, which the notebooks' real-clock checks counted as another program's
(06's stored run printed "busy machine" and measured again).
"""

from __future__ import annotations

import threading
import time

import psutil

SAMPLING_SHARE = 0.05  # of one core, at most, spent reading the processes' memory


def tree_pss(pid: int) -> int:
    """Bytes of PSS of process `pid` and all its descendants (0 if it is gone)."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for process in tree:
        try:
            total += process.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied, AttributeError):
            pass
    return total


class PeakMemory:
    """Sample `tree_pss` of the process `find_pid()` names (None until it exists) in a thread.

    with PeakMemory(lambda: kernel_pid) as peak:
        run_the_notebook()
    peak.bytes  # the largest sample
    """

    def __init__(self, find_pid, interval: float = 0.25):
        self.find_pid = find_pid
        self.interval = interval
        self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="peak-memory", daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mib(self) -> float | None:
        return round(self.bytes / 2**20, 1) if self.bytes else None

    def _sample(self) -> None:
        wait = self.interval
        while not self._stop.wait(wait):
            pid = self.find_pid()
            began = time.thread_time()
            if pid is not None:
                self.bytes = max(self.bytes, tree_pss(pid))
            wait = max(self.interval, (time.thread_time() - began) / SAMPLING_SHARE)
