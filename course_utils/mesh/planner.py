"""The planner: every DP/FSDP x TP x PP layout of a model on a cluster, costed, and the fastest.

It walks the factorisations of the cluster's GPUs into DP x TP x PP (TP inside a node
and dividing the heads, PP dividing the layers), and for each: a ZeRO stage (DDP, ZeRO-1,
FSDP), a pipeline schedule, a micro-batch size and an activation recomputation. Each is
costed by `plan_costs` (memory per rank and predicted step time); those that do not fit
a GPU's memory are set aside with the reason, the rest sorted by predicted time. On a tie
(DDP and ZeRO-1 move the same bytes; selective recomputation costs nothing in the
FLOP count) it prefers fewer tricks: less recomputation, a lower ZeRO stage, then less memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .plan_costs import RECOMPUTE, Layout, Memory, StepTime, check, memory, timed
from .plan_model import Cluster, Model, precision_key
from .plan_model import cluster as make_cluster
from .plan_model import model as make_model

ZERO_STAGES = (0, 1, 3)
MICRO_BATCHES = (1, 2, 4, 8)


@dataclass(frozen=True)
class Costed:
    """A layout with its memory per rank and its predicted step time."""

    layout: Layout
    memory: Memory
    time: StepTime

    @property
    def name(self) -> str:
        return self.layout.name

    def as_dict(self) -> dict:
        return {
            **self.layout.as_dict(),
            "memory_bytes": self.memory.as_dict(),
            "step_seconds": self.time.as_dict(),
        }


@dataclass
class Plan:
    """Feasible layouts, fastest first; the pick (None when nothing fits); and the layouts
    set aside, each with why."""

    model: Model
    cluster: Cluster
    precision: str
    layouts: list[Costed]
    pick: Costed | None
    rejected: list[tuple[Costed, str]] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "model": self.model.name,
            "cluster": self.cluster.name,
            "precision": self.precision,
            "pick": self.pick.as_dict() if self.pick else None,
            "layouts": [c.as_dict() for c in self.layouts],
            "rejected": [{**c.as_dict(), "why": why} for c, why in self.rejected],
        }


def evaluate(model: Model, cluster: Cluster, layout: Layout, precision: str = "bf16") -> Costed:
    """One layout's memory per rank and step time; ValueError if it cannot run at all."""
    check(model, cluster, layout)
    return _costed(model, cluster, layout, precision)


def _costed(model, cluster, layout, precision) -> Costed:
    return Costed(
        layout, memory(model, layout, precision), timed(model, cluster, layout, precision)
    )


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def layouts(
    model: Model, cluster: Cluster, zero_stages=ZERO_STAGES, micro_batches=MICRO_BATCHES
) -> list[Layout]:
    """Every layout that can run, fits or not: DP x TP x PP = the cluster's GPUs."""
    found = []
    for tp in _divisors(cluster.gpus_per_node):
        if model.heads % tp or cluster.gpus % tp:
            continue
        for pp in _divisors(cluster.gpus // tp):
            dp = cluster.gpus // (tp * pp)
            if model.layers % pp or model.global_batch % dp:
                continue
            local = model.global_batch // dp
            schedules = ("none",) if pp == 1 else ("1f1b", "gpipe", "interleaved")
            for b in micro_batches:
                if local % b:
                    continue
                m = local // b
                for schedule in schedules:
                    if schedule == "interleaved" and (m % pp or model.layers % (2 * pp)):
                        continue
                    for zero in zero_stages if dp > 1 else (0,):
                        found.extend(
                            Layout(dp, tp, pp, zero, schedule, m, b, recompute)
                            for recompute in RECOMPUTE
                        )
    return found


def _why_not(costed: Costed, cluster: Cluster) -> str:
    mem = costed.memory
    parts = {
        "weights": mem.params,
        "gradients": mem.grads,
        "optimizer state": mem.optimizer,
        "activations": mem.activations,
        "working set": mem.working_set,
    }
    largest = max(parts, key=parts.get)
    return (
        f"needs {mem.total / 1e9:.3g} GB per rank, more than the {cluster.memory_bytes / 1e9:.3g} "
        f"GB of one GPU (largest part: {largest}, {parts[largest] / 1e9:.3g} GB)"
    )


def _key(c: Costed):
    return (c.time.total, RECOMPUTE.index(c.layout.recompute), c.layout.zero, c.memory.total)


def plan(
    model: Model | str,
    cluster: Cluster | str,
    precision: str = "bf16",
    zero_stages=ZERO_STAGES,
    micro_batches=MICRO_BATCHES,
) -> Plan:
    """Cost every layout of `model` on `cluster` and pick the fastest that fits.

    `model`: a Model or a preset name ('course', 'llama3-8b', 'llama3-70b'); `cluster`: a
    Cluster or 'NODESxGPUS:KIND' ('8x8:h100'); `precision`: 'fp32' or 'bf16'.
    """
    model, cluster = make_model(model), make_cluster(cluster)
    precision_key(precision)
    candidates = layouts(model, cluster, zero_stages, micro_batches)
    if not candidates:
        raise ValueError(
            f"no DP x TP x PP layout of {model.name} uses exactly the {cluster.gpus} GPUs of "
            f"{cluster.name}: the global batch ({model.global_batch}) must be divisible by DP, "
            f"TP must divide the heads ({model.heads}) and PP the layers ({model.layers}). "
            "Change the number of GPUs or the global batch."
        )
    fits, rejected = [], []
    for layout in candidates:
        costed = _costed(model, cluster, layout, precision)
        if costed.memory.total <= cluster.memory_bytes:
            fits.append(costed)
        else:
            rejected.append((costed, _why_not(costed, cluster)))
    fits.sort(key=_key)
    rejected.sort(key=lambda r: r[0].memory.total)
    return Plan(model, cluster, precision, fits, fits[0] if fits else None, rejected)
