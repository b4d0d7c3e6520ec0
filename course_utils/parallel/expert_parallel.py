"""Expert parallelism by hand: a mixture-of-experts MLP whose tokens travel by all-to-all.

A router sends each token to its `top_k` best experts (a softmax over experts, the chosen
gates renormalised to sum to 1; Shazeer et al. 2017, Mixtral). The experts are spread
evenly over the ranks, so a token is computed where its expert lives: each rank sends the
rows of its tokens to the experts' ranks (dispatch), the experts run, and the results come
back the same way (combine) to be summed, gate-weighted, into the tokens' original places.

An expert takes at most its capacity, `capacity_factor` times its fair share of a group's
token choices (GShard, Lepikhin et al. 2020). A group is the tokens of one rank, so the drop
is decided before anything is sent, and a dropped choice never travels. Which choices are
dropped is deterministic: every token's first choice before any second choice, each in
token order. The one-process twin (`moe_one_process`) routes the same groups the same way,
so the two give the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F


@dataclass
class MoEWeights:
    """The router (width x experts, replicated on every rank) and experts `first`.. of an MLP
    layer: w1 (experts, width, hidden), b1 (experts, hidden), w2 (experts, hidden, width),
    b2 (experts, width)."""

    router: torch.Tensor
    w1: torch.Tensor
    b1: torch.Tensor
    w2: torch.Tensor
    b2: torch.Tensor
    first: int = 0  # the global index of w1[0]'s expert

    def tensors(self) -> list[torch.Tensor]:
        return [self.router, self.w1, self.b1, self.w2, self.b2]

    def for_rank(self, rank: int, world: int, device) -> MoEWeights:
        """Rank `rank`'s copy: the router and its E/N experts, as fresh leaves on `device`."""
        if self.w1.shape[0] % world:
            raise ValueError(
                f"{self.w1.shape[0]} experts cannot be spread evenly over {world} ranks: use "
                f"a number of ranks that divides the number of experts."
            )
        per_rank = self.w1.shape[0] // world
        own = slice(rank * per_rank, (rank + 1) * per_rank)
        cut = [self.router] + [t[own] for t in self.tensors()[1:]]
        leaves = [t.detach().clone().to(device).requires_grad_() for t in cut]
        return MoEWeights(*leaves, first=rank * per_rank)


def make_weights(width: int, hidden: int, experts: int, seed: int = 0) -> MoEWeights:
    """Random weights, the same on every rank and in the one-process twin (from `seed`)."""
    g = torch.Generator().manual_seed(seed)  # cpu: then copied to each rank's device

    def rand(*shape, fan_in):
        return torch.randn(*shape, generator=g) / math.sqrt(fan_in)  # cpu

    return MoEWeights(
        rand(width, experts, fan_in=width),
        rand(experts, width, hidden, fan_in=width),
        rand(experts, hidden, fan_in=width),
        rand(experts, hidden, width, fan_in=hidden),
        rand(experts, width, fan_in=hidden),
    )


def capacity(tokens: int, experts: int, top_k: int, capacity_factor: float) -> int:
    """Choices one expert takes from a group: `capacity_factor` times its fair share."""
    return math.ceil(capacity_factor * tokens * top_k / experts)


@dataclass
class Routing:
    """Where one group's tokens go: (tokens, top_k) experts, gates and whether kept."""

    expert: torch.Tensor
    gate: torch.Tensor  # differentiable: the router learns through it
    kept: torch.Tensor
    experts: int
    capacity: int

    def wanted(self) -> list[int]:
        """Choices per expert before the capacity cut."""
        return torch.bincount(self.expert.flatten(), minlength=self.experts).tolist()

    def kept_per_expert(self) -> list[int]:
        return torch.bincount(self.expert[self.kept], minlength=self.experts).tolist()

    def dropped(self) -> int:
        return int((~self.kept).sum())

    def assignments(self):
        """The kept (token, expert, gate) choices, sorted by expert (stably: by token
        within an expert), so that each destination rank's rows are contiguous."""
        token = torch.arange(self.expert.shape[0], device=self.expert.device)
        token = token[:, None].expand_as(self.expert)[self.kept]
        expert, gate = self.expert[self.kept], self.gate[self.kept]
        order = torch.sort(expert, stable=True).indices
        return token[order], expert[order], gate[order]


def route(x: torch.Tensor, router: torch.Tensor, top_k: int, capacity_factor: float,
          skew: float = 0.0) -> Routing:  # fmt: skip
    """Route one group of tokens `x` (tokens, width); `skew` is added to expert 0's logit."""
    logits = x @ router
    bias = torch.zeros(router.shape[1], dtype=x.dtype, device=x.device)
    bias[0] = skew
    top = torch.topk(F.softmax(logits + bias, dim=-1), top_k, dim=-1)
    gate = top.values / top.values.sum(-1, keepdim=True)
    experts = router.shape[1]
    cap = capacity(x.shape[0], experts, top_k, capacity_factor)
    by_priority = top.indices.T.flatten()  # first choices of every token, then second ...
    queue = torch.cumsum(F.one_hot(by_priority, experts), dim=0)
    place = queue.gather(1, by_priority[:, None]).squeeze(1) - 1  # its place in its expert's queue
    kept = (place < cap).view(top_k, -1).T
    return Routing(top.indices, gate, kept, experts, cap)


def expert_mlp(rows: torch.Tensor, w: MoEWeights, e: int) -> torch.Tensor:
    """Expert `e` (a local index into `w`) applied to `rows`."""
    return F.gelu(rows @ w.w1[e] + w.b1[e]) @ w.w2[e] + w.b2[e]


def _experts(rows: torch.Tensor, row_expert: torch.Tensor, w: MoEWeights) -> torch.Tensor:
    """Each row through its own expert (`row_expert`: local expert indices)."""
    out = rows.new_zeros(rows.shape)
    for e in range(w.w1.shape[0]):
        idx = (row_expert == e).nonzero().squeeze(1)
        out = out.index_add(0, idx, expert_mlp(rows[idx], w, e))
    return out


def moe_one_process(x: torch.Tensor, w: MoEWeights, top_k: int, capacity_factor: float,
                    skew: float = 0.0, groups: int = 1):  # fmt: skip
    """The twin: every expert here; `x` cut into `groups` groups routed one by one, as the
    ranks route their tokens. Returns the output and each group's `Routing`."""
    outs, routings = [], []
    for part in x.chunk(groups):
        routing = route(part, w.router, top_k, capacity_factor, skew)
        token, expert, gate = routing.assignments()
        y = _experts(part[token], expert, w)
        outs.append(part.new_zeros(part.shape).index_add(0, token, y * gate[:, None]))
        routings.append(routing)
    return torch.cat(outs), routings


def _all_to_all(rows: torch.Tensor, send_counts: list[int], recv_counts: list[int]):
    """Rows of `rows` (split along dim 0 by `send_counts`, one piece per rank) sent to each
    rank; the rows received, `recv_counts[r]` from rank r, in rank order."""
    out = rows.new_empty((sum(recv_counts), *rows.shape[1:]))
    dist.all_to_all_single(out, rows.contiguous(), recv_counts, send_counts)
    return out


class _AllToAll(torch.autograd.Function):
    """`_all_to_all` that autograd can see through: a row's gradient goes back to the
    rank that sent the row, by the same all-to-all with the counts swapped."""

    @staticmethod
    def forward(ctx, rows, send_counts, recv_counts):
        ctx.counts = (send_counts, recv_counts)
        return _all_to_all(rows, send_counts, recv_counts)

    @staticmethod
    def backward(ctx, grad):
        send, recv = ctx.counts
        return _all_to_all(grad, recv, send), None, None


def moe_expert_parallel(x: torch.Tensor, w: MoEWeights, top_k: int, capacity_factor: float,
                        skew: float = 0.0):  # fmt: skip
    """This rank's tokens `x` through the MoE layer whose experts are spread over the ranks
    (`w`: this rank's share, `MoEWeights.for_rank`). Returns the output, in `x`'s token
    order, the `Routing` of this rank's tokens and the rows its experts computed."""
    world = dist.get_world_size()
    routing = route(x, w.router, top_k, capacity_factor, skew)
    token, expert, gate = routing.assignments()
    per_rank = w.w1.shape[0]
    sending = torch.bincount(expert, minlength=per_rank * world).view(world, per_rank)
    ones = [1] * world
    receiving = _all_to_all(sending, ones, ones)  # (source rank, my expert)
    send_counts, recv_counts = sending.sum(1).tolist(), receiving.sum(1).tolist()
    rows = _AllToAll.apply(x[token], send_counts, recv_counts)
    local = torch.arange(per_rank, device=x.device).repeat(world)
    row_expert = torch.repeat_interleave(local, receiving.flatten())
    back = _AllToAll.apply(_experts(rows, row_expert, w), recv_counts, send_counts)
    out = x.new_zeros(x.shape).index_add(0, token, back * gate[:, None])
    return out, routing, rows.shape[0]
