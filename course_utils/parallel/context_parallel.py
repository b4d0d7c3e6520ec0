"""Context parallelism by hand: ring attention over a sequence split across the ranks.

Each rank holds the queries, keys and values of its share of the sequence. Attention
needs every key, so the K/V blocks travel round a ring (`allreduce.exchange`, N-1 hops): at
each step a rank attends its queries to the block it holds, merges the result into what
it has so far with the log-sum-exp rule (softmax is not additive, but its numerator and
denominator are), and passes the block on. No rank ever holds the whole sequence.

The causal mask is global: a query at position i sees keys at positions <= i wherever
they live. With the plain contiguous split, rank 0's queries come first and see almost
nothing, the last rank's see everything: the work grows with the rank. The zigzag split
cuts the sequence in 2N chunks and gives rank r chunks r and 2N-1-r, one early and one
late, so every rank does the same work (Liu et al. 2023 ring attention; the zigzag split
of Megatron-LM's context parallel and Brandon et al. 2023's striped attention).

The backward is a ring too, written by hand as FlashAttention's: K/V go round again, and
each block's gradient travels with it, so it is home after one last hop.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from .allreduce import exchange

LAYOUTS = ("contiguous", "zigzag")


def check_divisible(seq_len: int, world: int, layout: str) -> None:
    """Refuse a split that would give ranks unequal shares, saying what to change."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r}: choose one of {', '.join(LAYOUTS)}.")
    parts = 2 * world if layout == "zigzag" else world
    if seq_len % parts:
        raise ValueError(
            f"the {layout} split cuts a sequence of {seq_len} tokens into {parts} equal "
            f"chunks ({'2N' if layout == 'zigzag' else 'N'} for N={world} ranks), and "
            f"{seq_len} is not divisible by {parts}: pad the sequence to a multiple of "
            f"{parts} tokens or use another number of ranks."
        )


def _pieces(seq_len: int, world: int, rank: int, layout: str) -> list[range]:
    """The runs of global positions rank `rank` holds, in the order it stores them."""
    check_divisible(seq_len, world, layout)
    if layout == "contiguous":
        size = seq_len // world
        return [range(rank * size, (rank + 1) * size)]
    size = seq_len // (2 * world)
    return [range(c * size, (c + 1) * size) for c in (rank, 2 * world - 1 - rank)]


def positions(seq_len: int, world: int, rank: int, layout: str) -> torch.Tensor:
    """The global positions of the tokens rank `rank` holds, in its storage order."""
    return torch.tensor([p for run in _pieces(seq_len, world, rank, layout) for p in run])  # cpu


def shard(x: torch.Tensor, world: int, rank: int, layout: str, dim: int = 2) -> torch.Tensor:
    """Rank `rank`'s share of `x` along its sequence dimension `dim`."""
    return x.index_select(dim, positions(x.shape[dim], world, rank, layout).to(x.device))


def unshard(parts: list[torch.Tensor], layout: str, dim: int = 2) -> torch.Tensor:
    """The full sequence from every rank's share (in rank order): `shard` undone."""
    world, seq_len = len(parts), sum(p.shape[dim] for p in parts)
    order = torch.cat([positions(seq_len, world, r, layout) for r in range(world)])
    return torch.cat(parts, dim).index_select(dim, torch.argsort(order).to(parts[0].device))


def causal_mask(q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
    """True where a query may attend a key: the key's global position is not after its own."""
    return k_positions[None, :] <= q_positions[:, None]


def block_pairs(q_positions: torch.Tensor, k_positions: torch.Tensor, piece: int):
    """The (query slice, key slice, mask) pairs of one step that are not fully masked.

    Both sides are cut into runs of `piece` tokens (a zigzag rank holds two); a pair whose
    mask is all False is skipped, which is where zigzag saves work; `mask` is None where
    the pair is all True."""
    for i in range(0, len(q_positions), piece):
        for j in range(0, len(k_positions), piece):
            mask = causal_mask(q_positions[i : i + piece], k_positions[j : j + piece])
            if mask.any():
                yield slice(i, i + piece), slice(j, j + piece), None if mask.all() else mask


def piece_length(seq_len: int, world: int, layout: str) -> int:
    """Tokens in one of the runs a rank holds: N of them, or 2N for zigzag."""
    return seq_len // world if layout == "contiguous" else seq_len // (2 * world)


def merge(out_a, lse_a, out_b, lse_b):
    """Two partial attentions over disjoint keys as one: each weighted by its share of the
    softmax denominator, exp(lse), so the result is the attention over both key sets."""
    lse = torch.logaddexp(lse_a, lse_b)
    safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)  # rows with no key yet
    out = out_a * torch.exp(lse_a - safe)[..., None] + out_b * torch.exp(lse_b - safe)[..., None]
    return out, lse


def _attend(q, k, v, mask, scale):
    """Attention of `q` to one block of keys, with the log-sum-exp of each row's scores."""
    scores = q @ k.transpose(-1, -2) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    return torch.exp(scores - safe[..., None]) @ v, lse


def _next(block: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Pass `block` to the next rank of the ring; the previous rank's block comes back."""
    into = torch.empty_like(block)
    exchange(block.contiguous(), (rank + 1) % world, into, (rank - 1) % world)
    return into


class RingAttention(torch.autograd.Function):
    """Ring attention with its own backward: autograd through the sends would keep every
    block that passed by; this keeps only this rank's q, k, v, its output and the
    log-sum-exp of its scores."""

    @staticmethod
    def forward(ctx, q, k, v, layout):
        rank, world = dist.get_rank(), dist.get_world_size()
        seq_len, scale = q.shape[2] * world, 1 / math.sqrt(q.shape[-1])
        piece, q_pos = piece_length(seq_len, world, layout), positions(seq_len, world, rank, layout)
        out = torch.zeros_like(q)
        lse = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)
        kv = torch.stack([k, v])
        for step in range(world):
            k_pos = positions(seq_len, world, (rank - step) % world, layout)
            for qs, ks, mask in block_pairs(q_pos, k_pos, piece):
                mask = None if mask is None else mask.to(q.device)
                part = _attend(q[:, :, qs], kv[0][:, :, ks], kv[1][:, :, ks], mask, scale)
                out[:, :, qs], lse[:, :, qs] = merge(out[:, :, qs], lse[:, :, qs], *part)
            if step < world - 1:
                kv = _next(kv, rank, world)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.layout = layout
        return out

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, out, lse = ctx.saved_tensors
        rank, world = dist.get_rank(), dist.get_world_size()
        seq_len, scale = q.shape[2] * world, 1 / math.sqrt(q.shape[-1])
        piece = piece_length(seq_len, world, ctx.layout)
        q_pos = positions(seq_len, world, rank, ctx.layout)
        delta = (d_out * out).sum(-1)  # softmax's backward, once per query row
        dq = torch.zeros_like(q)
        kv, dkv = torch.stack([k, v]), torch.zeros(2, *k.shape, dtype=k.dtype, device=k.device)
        for step in range(world):
            k_pos = positions(seq_len, world, (rank - step) % world, ctx.layout)
            for qs, ks, mask in block_pairs(q_pos, k_pos, piece):
                qb, kb, vb, dob = q[:, :, qs], kv[0][:, :, ks], kv[1][:, :, ks], d_out[:, :, qs]
                scores = qb @ kb.transpose(-1, -2) * scale
                if mask is not None:
                    scores = scores.masked_fill(~mask.to(q.device), float("-inf"))
                p = torch.exp(scores - lse[:, :, qs, None])  # the final softmax, rebuilt
                dkv[1][:, :, ks] += p.transpose(-1, -2) @ dob
                ds = p * (dob @ vb.transpose(-1, -2) - delta[:, :, qs, None])
                dq[:, :, qs] += ds @ kb * scale
                dkv[0][:, :, ks] += ds.transpose(-1, -2) @ qb * scale
            if step < world - 1:
                kv = _next(kv, rank, world)
                dkv = _next(dkv, rank, world)
        if world > 1:  # the gradient of rank r+1's block is here: one hop takes it home
            dkv = _next(dkv, rank, world)
        return dq, dkv[0], dkv[1], None


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   layout: str = "zigzag") -> torch.Tensor:  # fmt: skip
    """Causal attention of this rank's queries over the whole sequence, on every rank.

    `q`, `k`, `v`: (batch, heads, seq_len/N, head_dim), this rank's share as `shard` cuts it
    with the same `layout`; the result is this rank's share of
    `F.scaled_dot_product_attention(q, k, v, is_causal=True)` on the full sequence, and so
    are the gradients."""
    check_divisible(q.shape[2] * dist.get_world_size(), dist.get_world_size(), layout)
    return RingAttention.apply(q, k, v, layout)
