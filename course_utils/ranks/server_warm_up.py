"""Imported by the forkserver's server as it starts, for its side effect: one tiny SGD step.

That step imports what torch loads lazily on a first optimizer step (torch._dynamo, sympy: 1-3 s
on 2 cores). Forked ranks inherit it from the kernel (`processes.warm_up_imports`); ranks
forked from the server inherit it from here. Without it each rank of every launch paid
about 2.5 s for its first step, and 04 ran six times as long under forkserver as under fork.
"""

from __future__ import annotations

from .processes import _one_sgd_step

_one_sgd_step()
