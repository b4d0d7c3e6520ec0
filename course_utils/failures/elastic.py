"""The resumable run under torchrun's elastic agent, which restarts it after a failure.

Every attempt loads the latest checkpoint, if there is one, and trains on. On the first
attempt (TORCHELASTIC_RESTART_COUNT=0) `kill_rank` SIGKILLs itself after `kill_at`
updates; its agent sees the worker die, tears the group down on every node and starts
it again, and the second attempt resumes from the checkpoint and finishes. The agents
meet through torchrun's c10d rendezvous (a TCP store that node 0's agent hosts, here at a
port the OS picked: no shared filesystem), and each round's workers form their process
group at a store of that round's own (`join_round`). `elastic_restart` runs that job on local
"nodes" and an uninterrupted twin beside it; the workers start in `elastic_worker`.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import io
import json
import os
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from unittest import mock

from ..core import progress
from ..core.backends import GLOO
from ..core.errors import LaunchError
from ..ranks.bootstrap import (
    cap_threads,
    init_process_group,
    leave,
    threads_per_rank,
    tie_to_parent,
)
from ..ranks.launch import launch
from ..ranks.local_nodes import TorchrunJob, run_local_nodes
from ..ranks.torchrun import report_results
from .resume import RunConfig, checkpointed_training

WORKER = f"{__package__}.elastic_worker"  # the module torchrun's agents run
# torchrun's agents otherwise share the rendezvous store with the workers, round after round
ROUND_STORES = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
AGENT_WORDS = (
    "FAILED",
    "will restart",
    "exitcode",
    "closing signal",
    "restart_count",
    "successfully finished",
)


def run_worker(argv: list[str] | None, agent: int) -> int:
    """One torchrun worker (started by `elastic_worker`, which tied it to `agent`)."""
    parser = argparse.ArgumentParser(prog=f"python -m {WORKER}")
    parser.add_argument("--config", required=True, help="a RunConfig as JSON")
    parser.add_argument("--backend", default="gloo", choices=["gloo"], help="CPU tensors: gloo")
    args = parser.parse_args(argv)
    cfg = RunConfig(**json.loads(args.config))
    join_round(agent)
    if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":  # the failure happens once
        cfg = replace(cfg, kill_rank=None, kill_at=None)
    result = checkpointed_training(replace(cfg, resume=True))
    result.pop("params")
    report_results(result)
    leave(0)


def join_round(agent: int) -> None:
    """Join this round's process group at the store torchrun names for this round.

    By default torchrun's agents share their rendezvous store with the workers, round
    after round, and the failed round's keys stay in it: the restarted group can read the
    dead round's addresses and connect to a dead rank (here, 5 of 6 restarts of the test's
    job then hung or failed). With
    `TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1` set for the agents, node 0's agent asks the OS
    for a free port every round (MASTER_PORT) and rank 0 hosts a fresh store there:
    `env://` then meets only this round's ranks.
    """
    restarts = int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0"))
    if restarts and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        raise SystemExit(
            "the agents share their rendezvous store with the workers, so a restarted group "
            "could meet the failed round's ranks: start torchrun with "
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 in its environment (elastic_restart does)."
        )
    faulthandler.enable()
    tie_to_parent(agent)  # again, for systems without a death signal: a watching thread
    cap_threads(threads_per_rank(int(os.environ["LOCAL_WORLD_SIZE"])))
    init_process_group("gloo", 30.0, "env://")


def elastic_restart(cfg: RunConfig, nodes: int, max_restarts: int, timeout: float = 120.0):
    """Run `cfg` as an `nodes`-node torchrun job with a kill; returns its ranks, the
    agents' lines about the failure and restart, an uninterrupted twin's digest, and the
    seconds from the SIGKILL to the restarted group's first update."""
    if max_restarts < 1:
        raise ValueError(
            f"max_restarts={max_restarts}: the agents restart the group only with "
            "max_restarts >= 1 (and meet through c10d only then)."
        )
    twin = launch(
        checkpointed_training, nodes, args=(replace(cfg, every=None, kill_rank=None),),
        timeout=timeout, backend=GLOO,
    )  # fmt: skip
    with (
        tempfile.TemporaryDirectory(prefix="course-elastic-") as root,
        progress.bar(cfg.steps, "elastic job", "update") as bar,
    ):
        job = replace(cfg, checkpoint_dir=root, log_dir=root)
        log, watch = io.StringIO(), JobWatch(Path(root), job, bar)
        try:
            # the agents copy this environment: LOGLEVEL=INFO logs their restarts
            with (
                mock.patch.dict(os.environ, LOGLEVEL="INFO", **ROUND_STORES),
                contextlib.redirect_stdout(log),
            ):
                config = ("--config", json.dumps(asdict(job)))
                elastic = TorchrunJob(None, nodes, 1, WORKER, config, max_restarts=max_restarts)
                ranks = run_local_nodes(elastic, timeout=timeout, bars=False, watch=watch)
        except LaunchError:
            print(log.getvalue())  # the nodes' logs, which the error refers to
            raise
        watch()  # the updates of the job's last moments
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


class JobWatch:
    """The elastic job's story on a bar while it runs, from the files its ranks write: the
    update rank 0 reached (`losses.txt`, a line per update, every round) and the kill
    (`killed_at.txt`). The startups, the kill and the restart take nearly all the time, so
    the bar waits at the killed update while the agents restart the group, then goes back to
    the checkpoint the new round resumes from."""

    def __init__(self, root: Path, cfg: RunConfig, bar):
        self.root, self.cfg, self.bar, self.shown, self.said = root, cfg, bar, 0, None

    def __call__(self) -> None:
        losses = self.root / "losses.txt"
        text = losses.read_text() if losses.exists() else ""
        steps = [int(line.split()[0]) for line in text.split("\n")[:-1]]  # whole lines only
        starts = [b for a, b in zip(steps, steps[1:], strict=False) if b <= a]  # new rounds
        if starts:
            said = {"round": len(starts) + 1, "resumed_from": starts[-1] - 1}
        elif (self.root / "killed_at.txt").exists():
            said = {"round": 1, "killed": f"rank {self.cfg.kill_rank} after {self.cfg.kill_at}"}
        else:
            said = {"round": 1}
        if said != self.said:
            self.bar.set_postfix(**said)
            self.said = said
        reached = steps[-1] if steps else 0
        self.bar.update(reached - self.shown)
        self.shown = reached


def _about_restart(line: str) -> bool:
    return "torch/distributed/elastic" in line and any(w in line for w in AGENT_WORDS)


def _short(line: str) -> str:
    """An agent's log line without its header: '[node 1] failed (exitcode: -9) ...'."""
    node, _, rest = line.partition("] ")
    return f"{node}] {rest.split('] ', 1)[-1].replace('[default] ', '')}"
