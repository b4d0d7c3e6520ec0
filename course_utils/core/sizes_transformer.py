"""The sizes of notebook 10's experiments (a small causal transformer split four ways).

Apart from `sizes.py` so that each stays short; the defaults are the `cpu` profile's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransformerSizes:
    """Notebook 10: tensor, sequence, context and expert parallelism on a small transformer."""

    vocab: int = 64  # tokens of the generated sequences
    width: int = 64  # model dimension; heads and the MLP split across ranks along it
    heads: int = 4  # divisible by every tensor-parallel world size
    mlp_ratio: int = 4  # the MLP's hidden width is mlp_ratio * width
    blocks: int = 2
    seq_len: int = 32  # divisible by 2N for the zigzag split of context parallel
    batch: int = 4  # sequences per step (every rank sees the same batch under TP/SP/CP)
    steps: int = 5  # optimizer steps before the parallel model is compared with one process
    lr: float = 1e-2
    world_sizes: tuple[int, ...] = (2, 4)
    experts: int = 4  # MoE experts, spread evenly over the expert-parallel ranks
    top_k: int = 2
    capacity_factor: float = 1.25  # tokens an expert takes: capacity_factor * fair share
    router_skew: float = 4.0  # logit bias towards expert 0 in the skewed-router experiment
    tolerance: float = 1e-5  # fp32 agreement with one process
    threads: int = 1
    timeout: float = 120.0  # one launch
