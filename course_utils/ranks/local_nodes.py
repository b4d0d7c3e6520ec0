"""Several machines through the standard launcher, torchrun, and a rehearsal on one machine.

`torchrun_command` is the exact command to type on each node. `run_local_nodes` starts
that command once per "node" on localhost, which is how the course shows (and tests) a
multi-node job without a cluster: each agent is a separate torchrun with its own node rank,
they meet at one rendezvous address, and the ranks form one process group.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..core import progress
from ..core.errors import LaunchError, Stopped
from . import agent, processes
from .bootstrap import THREADS_VAR, threads_per_rank
from .diagnosis import numbered

# Rank 0 of a torchrun job prints every rank's result on one line that starts so; here
# and not in the worker `ranks.torchrun`, so that importing this package leaves that module
# unimported: `python -m course_utils.ranks.torchrun` then runs its only copy.
RESULTS_PREFIX = "course_utils.ranks.torchrun results: "


@dataclass(frozen=True)
class TorchrunJob:
    """What every node of a torchrun job runs, written once for the command to type on each
    node (`torchrun_command`) and for its rehearsal on this machine (`run_local_nodes`).

    By default every rank runs `course_utils.ranks.torchrun TARGET`; give `module` and
    `module_args` to run another script, such as `course_utils.ddp.torchrun_train`. Either
    way the script is told `--backend`, unless `module_args` already says which; in a
    rehearsal the nodes share this machine's devices, so there "auto" means gloo. With
    `max_restarts`, the agents restart the group after a worker fails (torchrun's
    `--max-restarts`) and meet through the c10d rendezvous, so that every node joins the
    new round together.
    """

    target: str | None = None
    nnodes: int = 2
    nproc_per_node: int = 1
    module: str = "course_utils.ranks.torchrun"
    module_args: tuple[str, ...] | None = None
    backend: str = "auto"
    max_restarts: int = 0


def torchrun_command(
    job: TorchrunJob,
    *,
    node_rank: int,
    master_addr: str,
    master_port: int = 29500,
    python: str = "python",
    log_dir: str | None = None,
) -> list[str]:
    """The command to run on node `node_rank` (all nodes use the same master address and
    port)."""
    if isinstance(job.module_args, str):
        raise TypeError(
            f"module_args is one string, {job.module_args!r}: give one item per argument, "
            "as in ('--epochs', '2')."
        )
    module_args = [job.target] if job.module_args is None else list(job.module_args)
    if not any(a == "--backend" or a.startswith("--backend=") for a in module_args):
        module_args.append(f"--backend={job.backend}")
    restarts = job.max_restarts
    return [
        python, "-m", "torch.distributed.run",
        f"--nnodes={job.nnodes}",
        f"--nproc-per-node={job.nproc_per_node}",
        f"--node-rank={node_rank}",
        f"--master-addr={master_addr}",
        f"--master-port={master_port}",
        *(_restartable(master_addr, master_port, restarts) if restarts else []),
        *([f"--log-dir={log_dir}"] if log_dir else []),
        "-m", job.module, *module_args,
    ]  # fmt: skip


def _restartable(addr: str, port: int, max_restarts: int) -> list[str]:
    """Static rendezvous restarts each node on its own; c10d makes every agent restart."""
    rendezvous = ["--rdzv-backend=c10d", f"--rdzv-endpoint={addr}:{port}", "--rdzv-id=course"]
    return [f"--max-restarts={max_restarts}", *rendezvous]


def _tied_first(cmd: list[str]) -> list[str]:
    """`cmd` with its worker module, `-m MODULE`, run through `agent.TIED_WORKER`: tied to
    its agent before it imports anything of the course (see `agent`)."""
    at = len(cmd) - 1 - cmd[::-1].index("-m")
    return [*cmd[:at], agent.TIED_WORKER, *cmd[at + 1 :]]


def free_port() -> int:
    """A port the OS just handed out, so two rehearsals never share a rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_local_nodes(
    job: TorchrunJob,
    *,
    timeout: float = 120.0,
    echo: bool = True,
    bars: bool = True,
    watch: Callable[[], None] | None = None,
) -> list:
    """Run `job` as a torchrun job of `job.nnodes` nodes on localhost.

    Returns what rank 0 reported for every rank, in rank order. A node that fails stops
    the job at once and is named in the `LaunchError` (the first to fail, if several do);
    at the timeout the nodes still running are named. With `bars`, rank 0's progress bars
    come back as lines in the nodes' logs and are drawn here while the job runs; `watch` is
    called about ten times a second meanwhile (say, to move a bar of the caller's own).
    """
    if job.backend == "auto":
        job = replace(job, backend="gloo")
    nnodes = job.nnodes
    port = free_port()
    env = {**os.environ, "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", _lo())}
    ranks = nnodes * job.nproc_per_node
    env[THREADS_VAR] = str(threads_per_rank(ranks))  # all "nodes" share cores
    if bars:
        env[progress.LINES_VAR] = "1"
    workdir = Path(tempfile.mkdtemp(prefix="course-nodes-"))  # our logs and the agents'
    logs = [workdir / f"node{n}.log" for n in range(nnodes)]
    relay = BarRelay(logs)
    agents = []
    own_exit: dict[int, int] = {}  # exit codes of agents that ended by themselves
    failed: list[int] = []  # the nodes seen failing first
    interrupted, ended = False, 0  # ended: agents the kernel's bar has counted as done
    bar = progress.bar(nnodes, f"{nnodes}-node torchrun job", "node", show=None if bars else False)
    try:
        for n in range(nnodes):
            cmd = torchrun_command(
                job, node_rank=n, master_addr="127.0.0.1", master_port=port,
                python=sys.executable, log_dir=str(workdir / "torchelastic"),
            )  # fmt: skip
            cmd = _tied_first(cmd)
            with open(logs[n], "wb") as log, processes.interrupts_held():  # recorded, or not made
                agents.append(
                    processes.start_command(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
                )
        deadline = time.monotonic() + timeout
        while any(a.poll() is None for a in agents):
            if time.monotonic() > deadline:
                running = [n for n, a in enumerate(agents) if a.poll() is None]
                raise LaunchError(
                    f"{numbered(running, 'node')} of the {nnodes}-node torchrun job did not "
                    f"finish within {timeout:g} s; every agent was stopped. The logs are printed "
                    "above."
                )
            failed = [n for n, a in enumerate(agents) if a.poll() not in (None, 0)]
            if failed:
                break  # one node failed: the others would wait for it until the timeout
            relay()
            done = sum(a.poll() is not None for a in agents)
            bar.update(done - ended)  # also ticks its clock while none has ended
            ended = done
            if watch is not None:
                watch()
            time.sleep(0.1)
        bar.update(0 if failed else nnodes - ended)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()  # where it stopped, if it did
        own_exit = {n: a.poll() for n, a in enumerate(agents) if a.poll() is not None}
        try:
            with processes.interrupts_held():  # a second interrupt must not cut the stop short
                processes.stop(*agents, wait=10)
                relay.close()
        finally:  # the logs go even if the system holds a killed agent
            texts = [log.read_text(errors="replace") if log.exists() else "" for log in logs]
            shutil.rmtree(workdir, ignore_errors=True)
        failed = failed or sorted(n for n, code in own_exit.items() if code != 0)
        failed = failed or [n for n, a in enumerate(agents) if a.returncode != 0]
        if not interrupted and (echo or failed or len(agents) < nnodes):  # failures show logs
            for n, text in enumerate(texts):
                for line in text.splitlines():
                    if progress.PREFIX not in line:
                        print(f"[node {n}] {line}")
    if interrupted:
        raise Stopped(
            f"interrupted: the {nnodes}-node torchrun job was stopped ({len(agents)} of its "
            "agents had started); nothing is left running"
        ) from None
    if failed:
        raise LaunchError(
            f"node {failed[0]} of the {nnodes}-node torchrun job "
            f"{processes.exit_reason(own_exit.get(failed[0], agents[failed[0]].returncode))}; "
            "the logs are printed above.",
            rank=None,
        )
    for text in texts:  # a progress bar may share the line: look for the prefix anywhere
        for line in text.splitlines():
            if RESULTS_PREFIX in line:
                return json.loads(line.split(RESULTS_PREFIX, 1)[1])
    raise LaunchError("the torchrun job finished but rank 0 printed no results line.")


class BarRelay:
    """Rank 0's bars, read from the nodes' logs as they grow and drawn here: from every
    node's log, since the node that holds rank 0 may change when the agents restart a job."""

    def __init__(self, logs: list[Path]):
        self.logs, self.read, self.mirror = logs, [0] * len(logs), progress.Mirror()

    def __call__(self) -> None:
        for n, log in enumerate(self.logs):
            if not log.exists():
                continue
            with open(log, "rb") as f:
                f.seek(self.read[n])
                chunk = f.read()
            whole = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits
            self.read[n] += len(whole)
            for line in whole.decode(errors="replace").splitlines():
                self.mirror.feed(line)

    def close(self) -> None:
        """Draw what came last (a bar's final state) and take the bar away."""
        self()
        self.mirror.close()


def _lo() -> str:
    from .bootstrap import loopback_interface

    return loopback_interface() or "lo"
