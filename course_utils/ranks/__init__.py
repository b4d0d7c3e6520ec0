"""Starting ranks: real torch.distributed process groups from a notebook, a script or torchrun.

Notebook 00 (`00_launching_ranks.ipynb`) is this folder's chapter: `launch` and its
pre-flight checks, what a rank does before the learner's function (`bootstrap`), the one
process manager that `launch`, the sweep's trials and the local torchrun "nodes" share
(`processes`; `supervisor` watches ranks and `run_calls`' independent calls alike), the
torchrun entry point and a rehearsal of several nodes on one machine, with the chapter's
charts, exercise and start-up benchmark.

The names a notebook calls are resolved on first use: every rank imports this package,
and should not pay for matplotlib or torchrun's helpers to run the learner's function.
`launch` itself comes from `course_utils.launch` (this folder's module of that name).
"""

from __future__ import annotations

from ..core.lazy import names_on_first_use

_EXPORTS = {
    "launch_times": "charts",
    "check_largest_square": "exercises",
    "spread_over_nodes": "examples",
    "sum_of_ranks": "examples",
    "whoami": "examples",
    "live_children": "launch",
    "run_local_nodes": "local_nodes",
    "torchrun_command": "local_nodes",
}

__all__ = sorted(_EXPORTS)


__getattr__ = names_on_first_use(
    __name__, {name: (module, name) for name, module in _EXPORTS.items()}, globals()
)
