"""Notebook 11's 3D-mesh training as the worker torchrun starts, on one node or many.

    torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d \\
        --rdzv-endpoint=NODE0_ADDRESS:29500 --rdzv-id=mesh \\
        -m course_utils.mesh.mesh_worker --backend=auto

Every rank runs `mesh_runs.train_mesh` unchanged, with rank and world size from torchrun's
environment; rank 0 prints every rank's report on one line (`ranks.torchrun`'s results
line). `--config` takes the JSON of `mesh_runs.config_json` (default: the profile's mesh).
The course's own jobs start it through `ranks.agent.TIED_WORKER`, tied to its agent before
the seconds of imports; started by `-m`, it ties itself in `main` (`ranks.agent`), so a
stopped agent leaves no worker behind either way.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..ranks.agent import tie_to_agent

NAME = f"{__package__}.mesh_worker"  # also when run as __main__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m {NAME}", description=__doc__)
    parser.add_argument("--config", default=None, help="JSON of mesh_runs.config_json")
    parser.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for a missing peer")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        raise SystemExit(
            f"{NAME} is torchrun's worker: run it under `torchrun` (see its docstring), or call "
            "course_utils.ranks.local_nodes.run_local_nodes, which does."
        )
    tie_to_agent(NAME)
    from ..core import profiles  # torch and the course: seconds, now tied to the agent
    from ..ranks.bootstrap import join_from_torchrun, leave
    from ..ranks.torchrun import report_results
    from .mesh_runs import mesh_config, train_mesh

    join_from_torchrun(args.backend, args.timeout)
    cfg = mesh_config(args.config) if args.config else profiles.current().mesh
    report_results(train_mesh(cfg))
    leave(0)


if __name__ == "__main__":
    sys.exit(main())
