"""Checkers for notebook 10's context- and expert-parallel exercises.

1. `merge(out_a, lse_a, out_b, lse_b)`: two partial attentions (each over its own keys,
   with the log-sum-exp of its scores per query) as one, the step ring attention repeats.
2. `block_mask(q_positions, k_positions)`: which keys of a block each query may see, from
   the tokens' global positions.
3. `combine(returned, token, gate, num_tokens)`: the rows that came back from the experts,
   in dispatch order, summed gate-weighted into their tokens' places.

Each checker tries the learner's function on several sizes (so no fixed answer passes),
prints one verdict line naming the first mistake it recognises, and never raises.
"""

from __future__ import annotations

import math

import torch

from ..core.own_answers import answer, first_problem_verdict, mark
from ..parallel import context_parallel
from ..parallel.context_parallel import causal_mask, positions
from ..parallel.expert_parallel import route

mark(causal_mask, "causal mask")  # the course's own answers: refused when handed in
mark(context_parallel.merge, "merge")

MERGE_CASES = ((3, 4, 5, 2), (8, 16, 6, 10), (2, 3, 7, 16, 12, 4))  # ..., queries, dim, keys a, b
MASK_CASES = ((16, 2, "contiguous"), (24, 3, "zigzag"), (32, 4, "zigzag"), (12, 3, "contiguous"))
COMBINE_CASES = ((12, 4, 3, 1, 4.0), (20, 6, 4, 2, 1.0), (33, 5, 8, 2, 0.75))  # T, W, E, k, cf


def _close(a, b) -> bool:
    return a.shape == b.shape and torch.allclose(a.float(), b.float(), rtol=1e-5, atol=1e-6)


def _partial(q, k, v):
    """Attention of `q` over keys `k` alone, and the log-sum-exp of its scores."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, -1) @ v, torch.logsumexp(scores, -1)


def _merge_problem(merge, case):
    *lead, queries, dim, keys_a, keys_b = case
    g = torch.Generator().manual_seed(sum(case))
    q = torch.randn(*lead, queries, dim, generator=g) * 2  # cpu: peaked scores, unequal lse
    k = torch.randn(*lead, keys_a + keys_b, dim, generator=g)  # cpu
    v = torch.randn(*lead, keys_a + keys_b, dim, generator=g)  # cpu
    (out_a, lse_a), (out_b, lse_b) = (_partial(q, k[..., s, :], v[..., s, :])
                                      for s in (slice(0, keys_a), slice(keys_a, None)))  # fmt: skip
    out, lse = _partial(q, k, v)
    got = answer(merge, out_a, lse_a, out_b, lse_b)
    if not (isinstance(got, tuple | list) and len(got) == 2):
        return "merge should return two tensors, (out, lse)"
    got_out, got_lse = (torch.as_tensor(t) for t in got)
    where = f"{keys_a} + {keys_b} keys, out of shape {tuple(out.shape)}"
    if _close(got_out, (out_a + out_b) / 2) or _close(got_out, out_a + out_b):
        return (
            f"no rescale ({where}): each part is normalised over its own keys only; weight it "
            f"by its share of the whole softmax, exp(lse_part - lse), before adding"
        )
    if not _close(got_out, out):
        return f"{where}: out is not attention over both key sets"
    if not _close(got_lse, lse):
        return f"{where}: lse should be the log of exp(lse_a) + exp(lse_b)"
    return None


def check_merge(merge) -> bool:
    """`merge(out_a, lse_a, out_b, lse_b)` must give (out, lse) over both sets of keys."""
    return first_problem_verdict(
        merge,
        "merge",
        lambda case: _merge_problem(merge, case),
        [(case,) for case in MERGE_CASES],
        "merge gives attention over both key sets for every case tried",
    )


def _mask_problem(block_mask, seq_len, world, layout):
    for rank in range(world):
        q_pos = positions(seq_len, world, rank, layout)
        for source in range(world):
            k_pos = positions(seq_len, world, source, layout)
            got = answer(block_mask, q_pos, k_pos)
            got, want = torch.as_tensor(got), causal_mask(q_pos, k_pos)
            where = f"{layout} split, N={world}, queries of rank {rank}, keys of rank {source}"
            if got.shape != want.shape:
                return f"{where}: the mask should be {tuple(want.shape)}, queries x keys"
            if torch.equal(got.bool(), want):
                continue
            if torch.equal(got.bool(), torch.ones_like(want).tril()):
                return (
                    f"mask applied per block ({where}): a triangle in every block compares "
                    f"the tokens' places in the block; compare their global positions"
                )
            if torch.equal(got.bool(), causal_mask(k_pos, q_pos).T):
                return f"{where}: queries see keys after them; a key is visible if k <= q"
            return f"{where}: wrong mask; a query at position q sees the keys k <= q"
    return None


def check_block_mask(block_mask) -> bool:
    """`block_mask(q_positions, k_positions)` must give (queries, keys) True where visible."""
    return first_problem_verdict(
        block_mask,
        "block_mask",
        lambda *case: _mask_problem(block_mask, *case),
        MASK_CASES,
        "block_mask gives the global causal mask for every block tried",
    )


def _combine_problem(combine, tokens, width, experts, top_k, capacity_factor):
    g = torch.Generator().manual_seed(tokens * width)
    x = torch.randn(tokens, width, generator=g)  # cpu
    routing = route(x, torch.randn(width, experts, generator=g), top_k, capacity_factor)  # cpu
    token, _, gate = routing.assignments()
    returned = torch.randn(len(token), width, generator=g)  # cpu: the experts' results
    weighted = returned * gate[:, None]
    want = torch.zeros(tokens, width).index_add(0, token, weighted)  # cpu
    got = answer(combine, returned, token, gate.detach(), tokens)
    got = torch.as_tensor(got).detach()
    where = f"{tokens} tokens, top-{top_k}, {routing.dropped()} choices dropped"
    if got.shape != want.shape:
        return f"{where}: the result should be (num_tokens, width) = {tuple(want.shape)}"
    if _close(got, want):
        return None
    in_arrival = torch.zeros(tokens, width).index_add(0, token.sort().values, weighted)  # cpu
    same_rows = _close(got[got.sum(1).argsort()], want[want.sum(1).argsort()])
    if _close(got, in_arrival) or same_rows:
        return (
            f"tokens not sent back in order ({where}): the rows come back sorted by expert; "
            f"row i belongs to token[i]"
        )
    if _close(got, torch.zeros(tokens, width).index_add(0, token, returned)):  # cpu
        return f"{where}: each returned row is weighted by its gate before it is added"
    return f"{where}: a token's output is the gate-weighted sum of the rows it sent"


def check_combine(combine) -> bool:
    """`combine(returned, token, gate, num_tokens)` must put each token's rows back, summed."""
    return first_problem_verdict(
        combine,
        "combine",
        lambda *case: _combine_problem(combine, *case),
        COMBINE_CASES,
        "combine puts every token's rows back in its place for every case",
    )
