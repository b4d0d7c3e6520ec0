"""Context and expert parallelism's costs, from the split or the routing alone: the work
each rank does and the bytes it sends (`parallel.context_parallel` and
`parallel.expert_parallel` run them; notebook 10 sets the counts at the
`torch.distributed` boundary beside these).
"""

from __future__ import annotations

from ..parallel.context_parallel import block_pairs, piece_length, positions

COUNT_BYTES = 8  # the per-expert row counts are int64


def work_per_rank(seq_len: int, world: int, layout: str) -> list[int]:
    """Query-key scores each rank computes over the N steps (per sequence and head): the
    sum of the sizes of the block pairs `ring_attention` does not skip."""
    piece = piece_length(seq_len, world, layout)
    work = []
    for rank in range(world):
        q = positions(seq_len, world, rank, layout)
        total = 0
        for step in range(world):
            k = positions(seq_len, world, (rank - step) % world, layout)
            total += sum(piece * piece for _ in block_pairs(q, k, piece))
        work.append(total)
    return work


def ring_bytes(batch: int, heads: int, seq_len: int, head_dim: int, world: int,
               element_size: int = 4) -> dict[str, int]:  # fmt: skip
    """Bytes each rank sends in one ring attention, whatever the split.

    A rank's K or V block is batch x heads x (seq_len/N) x head_dim elements. Forward: K and
    V passed on N-1 times. Backward: K and V passed on N-1 times again, and their gradients
    N times (N-1 hops with the blocks, then one hop home)."""
    block = batch * heads * (seq_len // world) * head_dim * element_size
    hops = world - 1
    return {
        "forward": 2 * hops * block,
        "backward": 2 * hops * block + (2 * world * block if world > 1 else 0),
    }


def ep_bytes(kept: list[list[int]], width: int, element_size: int = 4) -> list[dict[str, int]]:
    """Bytes each rank sends in one MoE layer, from the routing alone.

    `kept[s][e]`: choices of group (rank) s that expert e keeps. Rank r's dispatch sends
    the rows of its tokens bound for experts elsewhere; its combine sends back the rows its
    experts computed for other ranks; each row is `width` elements. The backward sends the
    same rows' gradients the other way, so as many bytes again. Before the dispatch, each
    rank sends each other rank its row counts (E/N int64)."""
    world, experts = len(kept), len(kept[0])
    per_rank = experts // world

    def home(e):
        return e // per_rank

    out = []
    for r in range(world):
        dispatch = sum(c for e, c in enumerate(kept[r]) if home(e) != r)
        combine = sum(kept[s][e] for s in range(world) if s != r for e in range(experts)
                      if home(e) == r)  # fmt: skip
        rows = (dispatch + combine) * width * element_size
        counts = (world - 1) * per_rank * COUNT_BYTES
        out.append({"forward": rows + counts, "backward": rows, "rows_out": dispatch + combine})
    return out
