"""Notebook 11's 3D-mesh run: `train_mesh` in every rank, under `launch` or under torchrun.

`train_mesh(cfg)` is the whole job on one rank, reading its place from the process group
it finds (8 forked ranks here, or 2 nodes x 4 under torchrun: the same function), and
returns plain JSON-able numbers: its coordinates, its groups as `DeviceMesh` built them,
the bytes it sent over each dimension in one step, and its trained shard. The parent then
compares every shard with the same slice of one process trained alike (`shard_diffs`) and
every rank's bytes with `bytes_formula`.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, replace

import torch
import torch.distributed as dist

from ..core.sizes_model_parallel import MeshSizes, TransformerSizes
from ..model_parallel.schedules import gpipe_order
from ..network.recorder import Log, recording
from ..parallel.pipeline import pipeline_step
from ..ranks.bootstrap import device, synchronize
from ..ranks.examples import whoami
from ..ranks.launch import launch
from ..transformer.model import batches, build, one_process_steps
from .groups import coords_of, ranks_of_groups
from .mesh3d import next_token_loss, stage_blocks, stage_model, sync_dp

FP32 = 4
DIMS = ("dp", "pp", "tp")


def mesh_config(cfg) -> MeshSizes:
    """`cfg` as MeshSizes: already one, a dict, or the JSON text of `config_json`."""
    if isinstance(cfg, MeshSizes):
        return cfg
    raw = json.loads(cfg) if isinstance(cfg, str) else dict(cfg)

    def tuples(fields: dict) -> dict:  # JSON has lists where the dataclasses hold tuples
        return {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}

    return MeshSizes(model=TransformerSizes(**tuples(raw.pop("model", {}))), **tuples(raw))


def config_json(cfg: MeshSizes) -> str:
    """The text `mesh_config` reads back: what the torchrun worker takes as --config."""
    return json.dumps(asdict(cfg))


def check_layout(cfg: MeshSizes) -> dict[str, int]:
    """The size of each of dp, pp, tp; refuses a mesh the model or the batch cannot fill."""
    if sorted(cfg.dims) != sorted(DIMS):
        raise ValueError(f"the mesh's dimensions must be named {DIMS} (any order), got {cfg.dims}.")
    size = dict(zip(cfg.dims, cfg.shape, strict=True))
    stage_blocks(cfg.model.blocks, 0, size["pp"])
    if cfg.model.batch % (size["dp"] * cfg.microbatches):
        raise ValueError(
            f"batch {cfg.model.batch} does not split into dp={size['dp']} replicas of "
            f"{cfg.microbatches} equal micro-batches: make it a multiple of "
            f"{size['dp'] * cfg.microbatches}."
        )
    return size


OPTIMIZERS = {
    "sgd": lambda params, lr: torch.optim.SGD(params, lr=lr, momentum=0.9),
    "adam": lambda params, lr: torch.optim.Adam(params, lr=lr),
}


@dataclass
class RankMesh:
    """One rank's place in the mesh (`at`, per dimension), its groups and their members'
    global ranks, and the shard it trains with its optimizer."""

    cfg: MeshSizes
    size: dict[str, int]
    at: dict[str, int]
    groups: dict
    members: dict[str, list[int]]
    model: torch.nn.Module
    opt: torch.optim.Optimizer


def join_mesh(cfg) -> RankMesh:
    """Build this rank's part of the mesh (inside a rank of a `prod(cfg.shape)`-rank world):
    DeviceMesh's groups, its shard of the one-process model, and `cfg.optimizer`."""
    cfg = mesh_config(cfg)
    size = check_layout(cfg)
    if dist.get_world_size() != cfg.world_size:
        raise ValueError(
            f"a mesh of shape {cfg.shape} needs {cfg.world_size} ranks; this job has "
            f"{dist.get_world_size()}: start that many, or change the shape."
        )
    if cfg.optimizer not in OPTIMIZERS:
        raise ValueError(
            f"unknown optimizer {cfg.optimizer!r}: use one of {', '.join(OPTIMIZERS)}."
        )
    from torch.distributed.device_mesh import init_device_mesh

    dev = device()
    mesh = init_device_mesh(dev.type, cfg.shape, mesh_dim_names=cfg.dims)
    at = {d: mesh.get_local_rank(d) for d in cfg.dims}
    groups = {d: mesh.get_group(d) for d in cfg.dims}
    members = {d: dist.get_process_group_ranks(groups[d]) for d in cfg.dims}
    full = build(cfg.model, cfg.seed, device=dev)
    model = stage_model(full, at["pp"], size["pp"], at["tp"], size["tp"], groups["tp"])
    opt = OPTIMIZERS[cfg.optimizer](model.parameters(), cfg.model.lr)
    return RankMesh(cfg, size, at, groups, members, model, opt)


def mesh_step(rank: RankMesh, sequence: torch.Tensor) -> float | None:
    """One optimizer step on the batch `sequence`: this replica's share in GPipe's order,
    the gradients averaged over `dp`; the replica's loss on the last stage, else None."""
    replica = sequence.chunk(rank.size["dp"])[rank.at["dp"]]
    rank.opt.zero_grad(set_to_none=not rank.cfg.persistent_grads)
    micro = [(rows[:, :-1], rows[:, 1:]) for rows in replica.chunk(rank.cfg.microbatches)]
    order = gpipe_order(rank.at["pp"], rank.size["pp"], len(micro))
    sample = (replica.shape[1] - 1, rank.cfg.model.width)  # one sequence's activations
    pipeline = rank.members["pp"]
    loss = pipeline_step(rank.model, order, micro, next_token_loss, sample, pipeline)
    sync_dp(rank.model, rank.groups["dp"])
    rank.opt.step()
    return loss


def bytes_by_dim(log: Log, members: dict[str, list[int]]) -> dict[str, int]:
    """Bytes this rank sent over each dimension, read from what crossed `torch.distributed`:
    a collective belongs to the dimension whose group ran it, a send to `pp` (the only one
    that sends point to point). A ring's bytes for a collective (`network.messages`)."""
    sent = dict.fromkeys(members, 0)
    dims = {tuple(sorted(ranks)): d for d, ranks in members.items()}
    for m in log.messages:
        if m.op in ("send", "isend"):
            sent["pp"] += m.nbytes
        elif m.group is not None and m.op not in ("recv", "irecv", "arrived"):
            sent[dims[tuple(sorted(m.group))]] += m.nbytes
    return sent


def train_mesh(cfg) -> dict:
    """Train on this rank's place in the mesh for `cfg.steps` steps; what it reports.

    Runs inside a launched or torchrun rank whose world has `prod(cfg.shape)` ranks."""
    rank = join_mesh(cfg)
    sent, losses = [], []
    started = time.perf_counter()
    for sequence in batches(rank.cfg.model, rank.cfg.steps):
        with recording() as log:
            losses.append(mesh_step(rank, sequence))
        sent.append(bytes_by_dim(log, rank.members))
    synchronize()
    return {
        **whoami(),
        "coords": rank.at,
        "groups": rank.members,
        "bytes": sent[0],
        "same_every_step": all(s == sent[0] for s in sent),
        "losses": losses,
        "step_seconds": (time.perf_counter() - started) / rank.cfg.steps,
        "params": {k: p.detach().cpu().tolist() for k, p in rank.model.named_parameters()},
    }


def bytes_formula(cfg: MeshSizes) -> dict[int, dict[str, int]]:
    """Bytes each rank sends per step over each dimension, from the sizes alone (fp32).

    With B the batch, D, K, T the dp, pp, tp sizes, s the sequence, w the width, h the MLP
    width, L the blocks of the rank's stage and a = (B/D) s w 4 its replica's activations:
    - tp: 4 all-reduces of the activations per block (g twice forward, f twice backward),
      each micro-batch: 4 L x 2(T-1)/T x a;
    - pp: a forward to the next stage unless last, a backward to the previous unless first;
    - dp: one ring all-reduce of this rank's gradients, 2(D-1)/D x 4 P, where P counts its
      shard: per block 4w (LayerNorms) + (4w^2 + 3w + 2hw + h)/T + 2w (the row-parallel
      biases), plus (V + s) w on the first stage and 2w + V w on the last."""
    size = check_layout(cfg)
    m = cfg.model
    d, k, t = size["dp"], size["pp"], size["tp"]
    w, h, s = m.width, m.mlp_ratio * m.width, m.seq_len
    micro = m.batch // d // cfg.microbatches * s * w * FP32
    table = {}
    for rank in range(cfg.world_size):
        at = dict(zip(cfg.dims, coords_of(rank, cfg.shape), strict=True))
        stage = at["pp"]
        blocks = len(stage_blocks(m.blocks, stage, k))
        params = blocks * (4 * w + (4 * w * w + 3 * w + 2 * h * w + h) // t + 2 * w)
        params += (m.vocab + s) * w if stage == 0 else 0
        params += 2 * w + m.vocab * w if stage == k - 1 else 0
        table[rank] = {
            "dp": 2 * (d - 1) * params * FP32 // d,
            "pp": cfg.microbatches * micro * ((stage < k - 1) + (stage > 0)),
            "tp": cfg.microbatches * 4 * blocks * (2 * (t - 1) * micro // t),
        }
    return table


def shard_diffs(reports: list[dict], cfg: MeshSizes, reference: dict) -> dict[int, float]:
    """Per rank, the largest |parameter - the same slice of `reference`| (one process's
    trained state dict); infinite for a rank whose parameters are not its slice's."""
    size = check_layout(cfg)
    full = build(cfg.model, cfg.seed)
    full.load_state_dict(reference)
    diffs = {}
    for r in reports:
        at = r["coords"]
        twin = dict(
            stage_model(full, at["pp"], size["pp"], at["tp"], size["tp"]).named_parameters()
        )
        mine = {k: torch.tensor(v) for k, v in r["params"].items()}  # cpu: in the parent
        same = mine.keys() == twin.keys() and all(mine[k].shape == twin[k].shape for k in mine)
        diffs[r["rank"]] = (
            max((mine[k] - twin[k].detach()).abs().max().item() for k in mine) if same else math.inf
        )
    return diffs


@dataclass(frozen=True)
class MeshRun:
    sizes: MeshSizes
    diffs: dict[int, float]  # per rank: largest |shard - one process's slice|
    bytes: dict[int, dict[str, int]]  # per rank, per dimension: sent in one step
    formula: dict[int, dict[str, int]]  # the same from `bytes_formula`
    coords: dict[int, dict[str, int]]  # per rank: its place on each dimension
    groups: dict[str, list[list[int]]]  # per dimension: the groups DeviceMesh built
    losses: list[float]  # per step, averaged over the data-parallel replicas
    reference_losses: list[float]  # one process's
    same_every_step: bool  # every rank sent the same bytes in every step
    launch_seconds: float  # the whole launch: start-up, mesh, steps, results
    step_seconds: float  # rank 0's wall time per step


def summarize(reports: list[dict], cfg: MeshSizes, reference: dict) -> MeshRun:
    """A MeshRun from the ranks' reports (`launch`'s or a torchrun job's) and one process's
    `one_process_steps` result."""
    stages = check_layout(cfg)["pp"]
    last = [r for r in reports if r["coords"]["pp"] == stages - 1]
    replicas = {r["coords"]["dp"]: r["losses"] for r in last}
    groups = {d: ranks_of_groups({tuple(r["groups"][d]) for r in reports}) for d in cfg.dims}
    return MeshRun(
        cfg, shard_diffs(reports, cfg, reference["params"]),
        {r["rank"]: r["bytes"] for r in reports}, bytes_formula(cfg),
        {r["rank"]: r["coords"] for r in reports}, groups,
        [sum(step) / len(step) for step in zip(*replicas.values(), strict=True)],
        reference["losses"], all(r["same_every_step"] for r in reports), 0.0,
        reports[0]["step_seconds"],
    )  # fmt: skip


def bytes_lines(run: MeshRun) -> list[str]:
    """One line per rank: its place, and per dimension the bytes it sent per step beside the
    formula's, for the notebook to print before the verdict."""
    lines = []
    for rank, sent in sorted(run.bytes.items()):
        at = ", ".join(f"{d} {c}" for d, c in run.coords[rank].items())
        each = "; ".join(f"{d} {sent[d]} B (formula {run.formula[rank][d]})" for d in DIMS)
        lines.append(f"rank {rank} ({at}): {each}")
    return lines


def run_mesh(cfg: MeshSizes, backend: str = "gloo") -> MeshRun:
    """The 3D mesh trained in one launch of `prod(cfg.shape)` ranks and compared with one
    process trained alike (here, on the CPU)."""
    check_layout(cfg)
    reference = one_process_steps(cfg.model, cfg.steps, cfg.seed)
    started = time.perf_counter()
    reports = launch(train_mesh, cfg.world_size, backend=backend, timeout=cfg.timeout, args=(cfg,))
    return replace(summarize(reports, cfg, reference), launch_seconds=time.perf_counter() - started)
