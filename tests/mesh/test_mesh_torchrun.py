"""The same `train_mesh` as a 2-node torchrun job, rehearsed on two local agents: every shard
equals one process's slice, as under `launch`, and the dimensions that should cross nodes do.

Each rank of a local agent imports torch on its own (about 2.5 CPU-seconds each): 2 agents
x 4 ranks, the whole (2, 2, 2) mesh, took 31 s on the 2-core machine beside other work, 2 x 2
took 16 s. So the test runs the (1, 2, 2) mesh on 2 x 2, its pipeline stages on different
nodes and each stage's TP pair inside one, Megatron's placement; NODES = (2, 4) and
SHAPE = (2, 2, 2) rehearse the whole mesh, data-parallel replicas one per node."""

from __future__ import annotations

from dataclasses import replace

import pytest

from course_utils.core.sizes_model_parallel import MeshSizes
from course_utils.mesh import mesh_runs, mesh_worker
from course_utils.mesh import mesh_verdicts as v
from course_utils.ranks.examples import spread_over_nodes
from course_utils.ranks.local_nodes import TorchrunJob, run_local_nodes, torchrun_command
from course_utils.transformer.model import one_process_steps

NODES, SHAPE = (2, 2), (1, 2, 2)  # (2, 4), (2, 2, 2): the whole mesh, slower
SIZES = replace(MeshSizes(), shape=SHAPE)
MODULE = "course_utils.mesh.mesh_worker"


def test_the_mesh_runs_unchanged_on_two_torchrun_agents():
    config = ("--config", mesh_runs.config_json(SIZES))
    reports = run_local_nodes(TorchrunJob(None, *NODES, MODULE, config), echo=False, timeout=120)
    assert spread_over_nodes(reports, nnodes=NODES[0], per_node=NODES[1]).ok
    run = mesh_runs.summarize(reports, SIZES, one_process_steps(SIZES.model, SIZES.steps))
    assert v.mesh_equals_one_process(run.diffs, SIZES.tolerance).ok
    assert v.mesh_bytes_match_formula(run.bytes, run.formula).ok
    node = {r["rank"]: r["node_rank"] for r in reports}
    crossing = {d for d, gs in run.groups.items() for g in gs if len({node[r] for r in g}) > 1}
    assert crossing == ({"pp"} if SHAPE == (1, 2, 2) else {"dp"})


def test_the_worker_refuses_to_run_outside_torchrun(monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    with pytest.raises(SystemExit, match="torchrun's worker"):
        mesh_worker.main([])


def test_the_command_for_each_node_names_the_worker():
    job = TorchrunJob(None, nnodes=2, nproc_per_node=4, module=MODULE, module_args=())
    cmd = torchrun_command(job, node_rank=1, master_addr="node0")
    assert cmd[-3:] == ["-m", MODULE, "--backend=auto"]
    assert "--nnodes=2" in cmd and "--node-rank=1" in cmd
