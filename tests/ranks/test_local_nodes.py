"""The same worker function runs under torchrun: two agents on localhost form a 2-node job."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from recorded_bars import record_bars

from course_utils.core import progress
from course_utils.core.errors import CourseError, LaunchError
from course_utils.ranks.examples import spread_over_nodes, sum_of_ranks, whoami
from course_utils.ranks.launch import launch, live_children
from course_utils.ranks.local_nodes import BarRelay, TorchrunJob, run_local_nodes, torchrun_command
from course_utils.ranks.torchrun import load_target


def test_two_torchrun_agents_form_one_job():
    results = run_local_nodes(TorchrunJob("course_utils.ranks.examples:whoami"), echo=False)
    assert [r["rank"] for r in results] == [0, 1]
    assert all(r["world_size"] == 2 and r["backend"] == "gloo" for r in results)
    assert results[0]["pid"] != results[1]["pid"]
    assert [r["node_rank"] for r in results] == [0, 1]  # two agents, not one with two ranks
    assert results[0]["parent_pid"] != results[1]["parent_pid"]
    assert not spread_over_nodes(launch(whoami, 2, backend="gloo"), nnodes=2, per_node=1).ok


def test_same_function_under_launch_and_under_torchrun():
    under_launch = launch(sum_of_ranks, 2, backend="gloo")
    under_torchrun = run_local_nodes(
        TorchrunJob("course_utils.ranks.examples:sum_of_ranks"), echo=False
    )
    assert under_launch == under_torchrun == [1, 1]
    assert [r["rank"] for r in launch(whoami, 2, backend="gloo")] == [0, 1]


FAULTS = """
import os, signal, time
import torch.distributed as dist

def raises():
    if dist.get_rank() == 1:
        raise RuntimeError("node failure")
    time.sleep(60)

def kills_itself():
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)

def hangs():
    time.sleep(60)
"""


@pytest.mark.parametrize(
    "target, timeout, named",
    [
        ("raises", 60, "node 1 of the 2-node torchrun job exited with code 1"),
        ("kills_itself", 60, "node 1 of the 2-node torchrun job exited with code 1"),
        ("hangs", 5, "nodes 0 and 1 of the 2-node torchrun job did not finish within 5 s"),
    ],
)
def test_a_node_that_raises_dies_or_hangs_is_named_fast_and_nothing_is_left(
    tmp_path, monkeypatch, target, timeout, named
):
    script = tmp_path / "faults.py"
    script.write_text(FAULTS)
    bars = record_bars(monkeypatch)
    start = time.monotonic()
    with pytest.raises(LaunchError) as info:
        run_local_nodes(TorchrunJob(f"{script}:{target}"), echo=False, timeout=timeout)
    assert time.monotonic() - start < 30
    assert named in str(info.value)
    assert live_children() == []
    job_bar = bars[0]  # closed short of its total: the kernel's bar shows where it stopped
    assert job_bar.desc == "2-node torchrun job" and job_bar.closed and job_bar.n < 2


def test_command_names_every_node_option():
    job = TorchrunJob("course_utils.ranks.examples:whoami", nnodes=2, nproc_per_node=4)
    cmd = torchrun_command(job, node_rank=1, master_addr="10.0.0.1", master_port=29500)
    assert cmd[:3] == ["python", "-m", "torch.distributed.run"]
    for part in ("--nnodes=2", "--nproc-per-node=4", "--node-rank=1", "--master-addr=10.0.0.1"):
        assert part in cmd
    assert cmd[-3:] == [
        "course_utils.ranks.torchrun",
        "course_utils.ranks.examples:whoami",
        "--backend=auto",
    ]


def test_module_args_given_as_one_string_are_refused():
    job = TorchrunJob(module="course_utils.ddp.torchrun_train", module_args="--epochs 2")
    with pytest.raises(TypeError, match="one item per argument"):
        torchrun_command(job, node_rank=0, master_addr="h")


def test_worker_outside_torchrun_says_how_to_run_it():
    out = subprocess.run(
        [sys.executable, "-m", "course_utils.ranks.torchrun", "course_utils.ranks.examples:whoami"],
        capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert out.returncode != 0
    assert "run this under torchrun" in out.stderr


@pytest.mark.parametrize("target", ["no_colon", "course_utils.ranks.examples:missing", ":fn"])
def test_bad_targets_are_refused(target):
    with pytest.raises(SystemExit):
        load_target(target)


def test_the_agents_leave_no_log_folder_behind(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # our folders
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # and the agents' own
    assert run_local_nodes(TorchrunJob("course_utils.ranks.examples:sum_of_ranks"), echo=False)
    assert list(tmp_path.iterdir()) == []


def test_an_agent_the_system_still_holds_after_its_kill_is_named_and_the_logs_go(
    tmp_path, monkeypatch
):
    import tempfile

    from course_utils.ranks import local_nodes, processes

    stop = processes.stop

    def agent(cmd, **popen_kwargs):  # one that would run until stopped
        return subprocess.Popen(["sleep", "60"], start_new_session=True, **popen_kwargs)

    def held(*agents, wait):  # killed, but let go by the system only later
        stop(*agents, wait=wait)
        raise CourseError("process 1234 was sent SIGKILL but had not ended 10 s later")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the job's log folder
    monkeypatch.setattr(local_nodes.processes, "start_command", agent)
    monkeypatch.setattr(local_nodes.processes, "stop", held)
    with pytest.raises(CourseError, match="had not ended"):
        run_local_nodes(TorchrunJob("course_utils.ranks.examples:sum_of_ranks"), timeout=0.3)
    assert list(tmp_path.iterdir()) == []


def test_spread_over_nodes_needs_two_agents():
    """One `launch` with two ranks is one node: the two-agent verdict must print ✗ for it."""
    two_agents = [
        {"node_rank": 0, "local_rank": 0, "parent_pid": 10},
        {"node_rank": 1, "local_rank": 0, "parent_pid": 11},
    ]
    assert spread_over_nodes(two_agents, nnodes=2, per_node=1).ok
    one_node = [
        {"node_rank": 0, "local_rank": 0, "parent_pid": 10},
        {"node_rank": 0, "local_rank": 1, "parent_pid": 10},
    ]
    assert not spread_over_nodes(one_node, nnodes=2, per_node=1).ok
    shared_agent = [dict(r, parent_pid=10) for r in two_agents]
    assert not spread_over_nodes(shared_agent, nnodes=2, per_node=1).ok


def test_a_rank_whose_agent_dies_while_it_imports_leaves_instead_of_waiting_alone():
    """torchrun starts its workers in sessions of their own: a Stop that kills the agent
    during a worker's imports once left it tied to init, waiting on a rendezvous nobody
    served. `join_from_torchrun` checks that its parent is still a torchrun agent."""
    import os

    from torchrun_agents import seconds_it_outlives, stop_the_agent_once_its_worker_runs

    from course_utils.ranks import agent
    from course_utils.ranks.local_nodes import free_port

    module = "course_utils.ranks.torchrun"
    job = TorchrunJob("course_utils.ranks.examples:whoami", nnodes=1, module=module)
    cmd = torchrun_command(
        job, node_rank=0, master_addr="127.0.0.1", master_port=free_port(), python=sys.executable
    )
    was_torchrun, worker = stop_the_agent_once_its_worker_runs(cmd, dict(os.environ), module)
    assert was_torchrun and not agent.runs_torchrun(1)
    lived = seconds_it_outlives(worker, 60)  # its imports take a few seconds on 2 cores
    assert lived < 60, "the rank outlived its agent by 60 s"


def test_the_tied_worker_leaves_before_it_imports_the_module_it_was_to_run():
    """The course's jobs run each worker through `agent.TIED_WORKER`: the tie comes before any
    import of the course (whose package imports torch). Outside torchrun (its parent is
    this test) the runner leaves with ORPHANED and never looks for the module, which here
    does not exist: an import first would fail with 1 and a ModuleNotFoundError."""
    from course_utils.ranks import agent

    cmd = [sys.executable, agent.TIED_WORKER, "course_utils.no_such_module", "--x"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == agent.ORPHANED, done.stderr
    assert "course_utils.no_such_module: the torchrun agent" in done.stderr
    assert "ModuleNotFoundError" not in done.stderr


def test_the_jobs_the_course_starts_run_their_worker_tied_first(monkeypatch):
    from course_utils.ranks import agent, local_nodes

    class NotStarted(Exception):
        pass

    def record(cmd, **_):
        started.append(cmd)
        raise NotStarted

    started = []
    monkeypatch.setattr(local_nodes.processes, "start_command", record)
    with pytest.raises(NotStarted):
        run_local_nodes(TorchrunJob("course_utils.ranks.examples:whoami", 1), echo=False, timeout=1)
    assert started[0][-4:-2] == [agent.TIED_WORKER, "course_utils.ranks.torchrun"]


def test_rank_0s_bar_is_drawn_from_whichever_nodes_log_holds_it(tmp_path, monkeypatch):
    bars = record_bars(monkeypatch)
    logs = [tmp_path / "node0.log", tmp_path / "node1.log"]
    relay = BarRelay(logs)
    relay()  # no log yet: nothing to draw
    state = {"total": 4, "desc": "updates", "unit": "update"}
    line = progress.PREFIX + json.dumps({**state, "n": 1})
    logs[0].write_text(f"agent starting\n{line}\n" + line[:20])  # a line still being written
    logs[1].write_text("")
    relay()
    assert [(b.total, b.n) for b in bars] == [(4, 1)]  # the whole line's state, no more
    with open(logs[1], "a") as log:  # the restarted job's rank 0 runs on node 1
        log.write(progress.PREFIX + json.dumps({**state, "n": 4, "closed": True}) + "\n")
    relay.close()
    assert (bars[0].n, bars[0].closed) == (4, True)


TORCHRUN_WORKERS = (
    "course_utils.ranks.torchrun",
    "course_utils.ddp.torchrun_train",
    "course_utils.mesh.mesh_worker",
    "course_utils.failures.elastic_worker",
)


def test_a_torchrun_worker_is_not_imported_by_its_own_package():
    """`python -m` imports the package first: a worker module it had already imported then
    ran as a second copy, and every node printed a RuntimeWarning ('found in sys.modules
    after import of package'), which notebook 00 showed the learner. One process imports
    each worker's package in turn and looks for the worker right after it (a process per
    worker took 2.5-3.5 CPU-seconds, mostly torch's import). `ranks` goes first, since other
    chapters import its torchrun module, as they may. Nor do the chapters import matplotlib
    (`core.style.pyplot`): a worker draws nothing."""
    code = (
        "import importlib, sys\n"
        f"for w in {TORCHRUN_WORKERS!r}:\n"
        "    importlib.import_module(w.rpartition('.')[0])\n"
        "    print(w) if w in sys.modules else None\n"
        "print('matplotlib') if 'matplotlib' in sys.modules else None"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "", out.stderr
