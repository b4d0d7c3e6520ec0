"""Starting ranks: real torch.distributed process groups from a notebook, a script or torchrun.

Notebook 00 (`00_launching_ranks.ipynb`) is this folder's chapter: `launch` and its
pre-flight checks, what a rank does before the learner's function (`bootstrap`), the one
process manager that `launch`, the sweep's trials and the local torchrun "nodes" share
(`processes`; `supervisor` watches ranks and `run_calls`' independent calls alike), the
torchrun entry point and a rehearsal of several nodes on one machine, with the chapter's
charts, exercise and start-up benchmark.

Every rank imports this package; notebook 00 imports its chart (`charts`) by name.
`launch` itself comes from `course_utils.launch` (this folder's module of that name).
"""

from __future__ import annotations

from .examples import spread_over_nodes, sum_of_ranks, whoami
from .exercises import check_largest_square
from .launch import live_children
from .local_nodes import TorchrunJob, run_local_nodes, torchrun_command
