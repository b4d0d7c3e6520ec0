"""Starting ranks: real torch.distributed process groups from a notebook, a script or torchrun.

Notebook 00 (`00_launching_ranks.ipynb`) is this folder's chapter: `launch` and its
pre-flight checks, what a rank does before the learner's function (`bootstrap`), the one
process manager that `launch`, the sweep's trials and the local torchrun "nodes" share,
the torchrun entry point and a rehearsal of several nodes on one machine, with the
chapter's charts, exercise and start-up benchmark.
"""
