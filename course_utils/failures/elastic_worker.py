"""The worker torchrun's agents start for the elastic run; it dies with its agent.

    python -m torch.distributed.run --nnodes=2 --nproc-per-node=1 --max-restarts=1 \\
        --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT ... \\
        -m course_utils.failures.elastic_worker --config '{"steps": 24, ...}'

The course's own jobs start it through `ranks.agent.TIED_WORKER`, which ties it to its
agent before the seconds of imports (the course's package imports torch); started by `-m`
as above, it ties itself in `main`, and a worker whose agent died meanwhile leaves at once
instead of training on alone.
"""

from __future__ import annotations

import os
import sys

from ..ranks.agent import ORPHANED, runs_torchrun, tie_to_agent

__all__ = ["ORPHANED", "main", "runs_torchrun", "tie_to_agent"]

NAME = f"{__package__}.elastic_worker"  # also when run as __main__


def main(argv: list[str] | None = None) -> int:
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        raise SystemExit(
            f"{NAME} is torchrun's worker: run it under `python -m torch.distributed.run` (see "
            "its docstring), or call course_utils.failures.elastic_restart, which does."
        )
    agent = tie_to_agent(NAME)
    from .elastic import run_worker  # torch and the course: seconds, now tied to the agent

    return run_worker(argv, agent)


if __name__ == "__main__":
    sys.exit(main())
