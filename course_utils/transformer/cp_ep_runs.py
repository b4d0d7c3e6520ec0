"""Notebook 10's context- and expert-parallel experiments: ranks against one process.

Each launcher runs the hand-written algorithm on real ranks, brings their shares home and
compares them, here in the notebook's process, with the one-process twin on the same
inputs and weights: `F.scaled_dot_product_attention` for ring attention, `moe_one_process`
for the experts. The bytes each rank logged (`comm`) come home beside the formula's,
which is computed from sizes (ring attention) or from the one-process routing (experts),
never from the trace it is checked against. Everything returned is plain numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..parallel.context_parallel import LAYOUTS, ring_attention, shard, unshard
from ..parallel.expert_parallel import make_weights, moe_expert_parallel, moe_one_process
from ..ranks.bootstrap import device
from ..ranks.launch import launch
from . import comm
from .cp_ep_formulas import ep_bytes, ring_bytes, work_per_rank


@dataclass
class RingRun:
    world: int
    layout: str
    out_diff: float  # largest |ring - full attention| over the output, relative (`_diff`)
    grad_diff: float  # ... over the gradients of q, k and v (the largest of the three)
    sent: list[dict[str, int]]  # per rank: bytes sent "forward" and "backward" (logged)
    formula: dict[str, int]  # `ring_bytes`, the same for every rank
    messages: list[dict[str, int]]  # per rank: sends per direction
    work: list[int]  # query-key scores per rank (`work_per_rank`)
    log: list = field(default_factory=list)  # rank 0's messages (`comm.Message`)


@dataclass
class MoERun:
    world: int
    skew: float
    top_k: int
    capacity_factor: float
    out_diff: float  # largest |expert parallel - one process| over the output, relative
    grad_diff: float  # ... over the gradients of the input, router and experts (largest)
    capacity: int  # choices one expert keeps per group (rank)
    wanted_per_expert: list[int]  # choices before the capacity cut, all groups
    kept_per_expert: list[int]  # choices the experts computed, all groups
    tokens_per_rank: list[int]  # rows each rank's experts computed (measured on the ranks)
    dropped: int  # choices dropped, all groups
    sent: list[dict[str, int]]  # per rank: bytes sent "forward" and "backward" (logged)
    formula: list[dict[str, int]]  # per rank: `ep_bytes` from the one-process routing
    log: list = field(default_factory=list)  # rank 0's messages (`comm.Message`)


def _randn(generator, *shape) -> torch.Tensor:
    return torch.randn(*shape, generator=generator)  # cpu: the same numbers on every rank


def _attention_inputs(sizes, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    shape = (sizes.batch, sizes.heads, sizes.seq_len, sizes.width // sizes.heads)
    return [_randn(g, *shape) for _ in range(4)]  # q, k, v and the output's gradient


def _sent(log) -> dict[str, int]:
    return {d: comm.bytes_sent(log, direction=d) for d in ("forward", "backward")}


def _diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest difference, relative to the largest value: fp32 rounds each of a few
    hundred summed terms, so gradients of size 25 differ by ~1e-5 whichever way they are
    summed, while the relative difference stays near 1e-7."""
    a, b = a.detach(), b.detach()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def _ring_rank(sizes, seed: int) -> dict:
    rank, world = dist.get_rank(), dist.get_world_size()
    full = [t.to(device()) for t in _attention_inputs(sizes, seed)]
    results = {}
    for layout in LAYOUTS:
        q, k, v, d_out = (shard(t, world, rank, layout) for t in full)
        q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
        with comm.count_communication() as log:
            with comm.labelled("ring attention", "forward"):
                out = ring_attention(q, k, v, layout)
            with comm.labelled("ring attention", "backward"):
                out.backward(d_out)
        results[layout] = {
            "tensors": [out.detach(), q.grad, k.grad, v.grad],
            "sent": _sent(log),
            "messages": {d: sum(m.direction == d for m in log) for d in ("forward", "backward")},
            "log": log,
        }
    return results


def ring_vs_full(sizes, world: int, seed: int = 0) -> list[RingRun]:
    """Ring attention on `world` ranks, both splits, against full causal attention."""
    ranks = launch(_ring_rank, world, args=(sizes, seed), timeout=sizes.timeout)
    q, k, v, d_out = (t.requires_grad_() for t in _attention_inputs(sizes, seed))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.backward(d_out.detach())
    want = [out.detach(), q.grad, k.grad, v.grad]
    runs = []
    for layout in LAYOUTS:
        got = [unshard([r[layout]["tensors"][i] for r in ranks], layout) for i in range(4)]
        diffs = [_diff(a, b) for a, b in zip(got, want, strict=True)]
        runs.append(
            RingRun(
                world,
                layout,
                out_diff=diffs[0],
                grad_diff=max(diffs[1:]),
                sent=[r[layout]["sent"] for r in ranks],
                formula=ring_bytes(*q.shape[:3], q.shape[3], world),
                messages=[r[layout]["messages"] for r in ranks],
                work=work_per_rank(sizes.seq_len, world, layout),
                log=ranks[0][layout]["log"],
            )
        )
    return runs


def ring_runs(sizes, world_sizes=None) -> list[RingRun]:
    """`ring_vs_full` for every world size of the profile (or `world_sizes`)."""
    return [run for n in (world_sizes or sizes.world_sizes) for run in ring_vs_full(sizes, n)]


def work_by_layout(sizes, world: int) -> dict[str, list[int]]:
    """Query-key scores each rank computes, per split: the chart's data."""
    return {layout: work_per_rank(sizes.seq_len, world, layout) for layout in LAYOUTS}


def _moe_inputs(sizes, seed: int):
    g = torch.Generator().manual_seed(seed + 1)
    tokens = sizes.batch * sizes.seq_len
    x, d_out = _randn(g, tokens, sizes.width), _randn(g, tokens, sizes.width)
    return make_weights(sizes.width, sizes.mlp_ratio * sizes.width, sizes.experts, seed), x, d_out


def _moe_rank(sizes, skews, seed: int) -> dict:
    rank, world = dist.get_rank(), dist.get_world_size()
    weights, x, d_out = _moe_inputs(sizes, seed)
    results = {}
    for name, skew in skews.items():
        w = weights.for_rank(rank, world, device())
        mine = x.chunk(world)[rank].to(device()).requires_grad_()
        with comm.count_communication() as log:
            with comm.labelled("moe layer", "forward"):
                out, _, rows = moe_expert_parallel(
                    mine, w, sizes.top_k, sizes.capacity_factor, skew
                )
            with comm.labelled("moe layer", "backward"):
                out.backward(d_out.chunk(world)[rank].to(device()))
        grads = [mine.grad] + [t.grad for t in w.tensors()]
        results[name] = {
            "out": out.detach(),
            "grads": grads,
            "rows": rows,
            "sent": _sent(log),
            "log": log,
        }
    return results


def _column_sums(rows: list[list[int]]) -> list[int]:
    return [sum(col) for col in zip(*rows, strict=True)]


def moe_vs_one_process(sizes, world: int, skews: dict[str, float] | None = None,
                       seed: int = 0) -> dict[str, MoERun]:  # fmt: skip
    """The expert-parallel MoE on `world` ranks against one process, for each router of
    `skews` (name: logit bias towards expert 0); by default "balanced" (no bias) and
    "skewed" (the profile's `router_skew`)."""
    skews = skews or {"balanced": 0.0, "skewed": sizes.router_skew}
    ranks = launch(_moe_rank, world, args=(sizes, skews, seed), timeout=sizes.timeout)
    runs = {}
    for name, skew in skews.items():
        weights, x, d_out = _moe_inputs(sizes, seed)
        leaves = [x.requires_grad_()] + [t.requires_grad_() for t in weights.tensors()]
        out, routings = moe_one_process(
            x, weights, sizes.top_k, sizes.capacity_factor, skew, groups=world
        )
        out.backward(d_out)
        got = [r[name] for r in ranks]
        grads = [
            torch.cat([r["grads"][0] for r in got]),  # each rank's tokens
            sum(r["grads"][1] for r in got),  # the replicated router: summed, as DP would
            *(torch.cat([r["grads"][i] for r in got]) for i in range(2, 6)),  # experts
        ]
        kept = [routing.kept_per_expert() for routing in routings]
        runs[name] = MoERun(
            world,
            skew,
            sizes.top_k,
            sizes.capacity_factor,
            out_diff=_diff(torch.cat([r["out"] for r in got]), out),
            grad_diff=max(_diff(a, b.grad) for a, b in zip(grads, leaves, strict=True)),
            capacity=routings[0].capacity,
            wanted_per_expert=_column_sums([routing.wanted() for routing in routings]),
            kept_per_expert=_column_sums(kept),
            tokens_per_rank=[r["rows"] for r in got],
            dropped=sum(routing.dropped() for routing in routings),
            sent=[r["sent"] for r in got],
            formula=ep_bytes(kept, sizes.width, x.element_size()),
            log=got[0]["log"],
        )
    return runs


def moe_runs(sizes, world_sizes=None) -> dict[int, dict[str, MoERun]]:
    """`moe_vs_one_process` for every world size of the profile (or `world_sizes`)."""
    return {n: moe_vs_one_process(sizes, n) for n in (world_sizes or sizes.world_sizes)}
