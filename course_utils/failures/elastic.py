"""The resumable run under torchrun's elastic agent, which restarts it after a failure.

    python -m torch.distributed.run --nnodes=2 --nproc-per-node=1 --max-restarts=1 ... \\
        -m course_utils.failures.elastic --config '{"steps": 24, ...}'

Every attempt loads the latest checkpoint, if there is one, and trains on. On the first
attempt (TORCHELASTIC_RESTART_COUNT=0) `kill_rank` SIGKILLs itself after `kill_at`
updates; its agent sees the worker die, tears the group down on every node and starts
it again, and the second attempt resumes from the checkpoint and finishes.
`elastic_restart` runs that job on local "nodes" and an uninterrupted twin beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import io
import json
import os
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

from ..core.errors import LaunchError
from ..ranks.bootstrap import (
    cap_threads,
    init_process_group,
    leave,
    threads_per_rank,
    tie_to_parent,
)
from ..ranks.launch import launch
from ..ranks.local_nodes import run_local_nodes
from ..ranks.torchrun import report_results
from . import checkpoint
from .resume import RunConfig, checkpointed_training

AGENT_WORDS = (
    "FAILED",
    "will restart",
    "exitcode",
    "closing signal",
    "restart_count",
    "successfully finished",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.failures.elastic")
    parser.add_argument("--config", required=True, help="a RunConfig as JSON")
    parser.add_argument("--backend", default="gloo", choices=["gloo"], help="CPU tensors: gloo")
    args = parser.parse_args(argv)
    cfg = RunConfig(**json.loads(args.config))
    join_round(cfg.checkpoint_dir)
    if checkpoint.latest(cfg.checkpoint_dir) is not None:
        cfg = replace(cfg, kill_rank=None, kill_at=None)  # the failure happens once
    result = checkpointed_training(replace(cfg, resume=True))
    result.pop("params")
    report_results(result)
    leave(0)


def join_round(folder: str) -> None:
    """Join this round's process group through a file named after the latest checkpoint.

    The agents' store outlives a restart, and a node restarted for a peer's failure keeps
    its restart count at 0, so the default `env://` group can read the failed round's
    addresses and connect to a dead rank. A file per round (each round starts from a newer
    checkpoint) cannot.
    """
    faulthandler.enable()
    tie_to_parent(os.getppid())
    cap_threads(threads_per_rank(int(os.environ["LOCAL_WORLD_SIZE"])))
    round_file = Path(folder) / f"rendezvous-after-{checkpoint.latest(folder)}"
    init_process_group(
        "gloo", 30.0, f"file://{round_file}", int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    )


def elastic_restart(cfg: RunConfig, nodes: int, max_restarts: int, timeout: float = 120.0):
    """Run `cfg` as an `nodes`-node torchrun job with a kill; returns its ranks, the
    agents' lines about the failure and restart, an uninterrupted twin's digest, and the
    seconds from the SIGKILL to the restarted group's first update."""
    twin = launch(
        checkpointed_training, nodes, args=(replace(cfg, every=None, kill_rank=None),),
        timeout=timeout,
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="course-elastic-") as root:
        job = replace(cfg, checkpoint_dir=root, log_dir=root)
        log = io.StringIO()
        try:
            with _agent_log_level("INFO"), contextlib.redirect_stdout(log):
                ranks = run_local_nodes(
                    None, nnodes=nodes, nproc_per_node=1, timeout=timeout,
                    max_restarts=max_restarts, module="course_utils.failures.elastic",
                    module_args=["--config", json.dumps(asdict(job))],
                )  # fmt: skip
        except LaunchError:
            print(log.getvalue())  # the nodes' logs, which the error refers to
            raise
        killed = Path(root) / "killed_at.txt"
        killed_at = float(killed.read_text()) if killed.exists() else float("nan")
    agent = [_short(line) for line in log.getvalue().splitlines() if _about_restart(line)]
    again = min(r["first_step_at"] or float("nan") for r in ranks)
    return {
        "ranks": ranks,
        "agent": agent,
        "twin_digest": twin[0]["digest"],
        "kill_to_resume_seconds": again - killed_at,
    }


@contextlib.contextmanager
def _agent_log_level(level: str):
    """torchrun's agent logs its restarts at INFO; it reads the level from LOGLEVEL."""
    before = os.environ.get("LOGLEVEL")
    os.environ["LOGLEVEL"] = level
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("LOGLEVEL")
        else:
            os.environ["LOGLEVEL"] = before


def _about_restart(line: str) -> bool:
    return "torch/distributed/elastic" in line and any(w in line for w in AGENT_WORDS)


def _short(line: str) -> str:
    """An agent's log line without its header: '[node 1] failed (exitcode: -9) ...'."""
    node, _, rest = line.partition("] ")
    return f"{node}] {rest.split('] ', 1)[-1].replace('[default] ', '')}"


if __name__ == "__main__":
    sys.exit(main())
