"""A parameter server's inbox: messages from any worker, waited for with a deadline.

Gloo cannot poll a receive, and one from a dead peer never returns, so the server
receives from any worker on a helper thread and waits on a queue with a timeout.
"""

from __future__ import annotations

import queue
import threading

import torch
import torch.distributed as dist

from ..ranks.bootstrap import device


class Inbox:
    """Receives from any worker on a helper thread, so the server can wait with a deadline."""

    def __init__(self, size: int):
        self.queue: queue.Queue = queue.Queue()
        self.size = size
        threading.Thread(target=self._pump, daemon=True, name="ps-inbox").start()

    def _pump(self) -> None:
        try:
            while True:
                message = torch.empty(self.size, device=device())
                sender = dist.recv(message)
                self.queue.put((sender, message))
        except Exception:  # the group is torn down at the end of the run: nothing to report
            return

    def get(self, timeout: float):
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None, None
