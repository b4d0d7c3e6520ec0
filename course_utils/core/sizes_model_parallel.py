"""The sizes of the chapters that split one model across ranks: 06's pipelines, 10's
transformer, 11's 3D mesh of that transformer. The other chapters' are in `sizes`; the
defaults are the `cpu` profile's, and a profile in `profiles` overrides what it runs bigger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PipelineSizes:
    """Notebook 06: model parallelism, pipeline schedules and the bubble.

    The pictures pad ops with sleep to a slot (an illustration of the schedule); the
    bubble is measured with real compute on the ranks' link clocks (`real_*`).
    """

    stages: int = 4  # K for the bubble sweep, 1F1B vs GPipe and the unbalanced pipeline
    microbatches: tuple[int, ...] = (1, 2, 4, 8, 16)  # M for the bubble sweep
    repeats: int = 3  # steps per M; the median bubble is reported
    picture_stages: int = 3  # the blog's picture: 3 samples over 3 GPUs
    picture_microbatches: int = 3
    picture_slot_seconds: float = 0.06
    compare_microbatches: int = 8  # M for 1F1B against GPipe and for the unbalanced run
    heavy_stage: int = 1  # the stage made heavier in the unbalanced pipeline
    heavy_factor: float = 2.0
    micro_batch_size: int = 8  # samples per micro-batch (MNIST-1D)
    hidden: int = 32  # width of the small real layer inside every stage
    real_width: int = 2048  # real-compute bubble: equal stages this wide (~12 ms forward on
    # 128 samples); 16 MiB of weights per stage, so that two stages computing at once do not
    # slow each other (at 4096 x 128 they did, by 3-9%, and the bubble at M = 16 drifted)
    real_micro_batch_size: int = 128  # 256 took 25 s more of notebook 06 for the same verdicts
    real_repeats: int = 2  # steps per M, each timed on the ranks' link clocks (CPU time +
    # waits); the least idle counts: a stage that the shared machine slowed for a moment
    # only ever adds idle time, and at M = 16 1% of imbalance adds 5% to the bubble
    formula_up_to: int = 8  # the real-clock sweep's largest M: past it the bubble is a few
    # points of the step, and the CPU a stage spends handing on is a good part of it
    tp_ranks: int = 2  # ranks a layer's neurons are split over
    tp_widths: tuple[int, ...] = (40, 64, 64, 64, 10)  # MNIST-1D in, 10 classes out
    tp_batch: int = 32
    # section 7, past 1F1B: GPipe, 1F1B, interleaved 1F1B and ZB-H1 at one K and M, on both
    # clocks (the real one runs min(K, cores) stages), and trained against one process
    schedule_stages: int = 2  # K
    schedule_microbatches: int = 4  # M = 2K: a bubble of 20% for 1F1B, big enough that 15%
    # of the smallest one (ZB-H1's, about 9% here) is not one slow op
    virtual_stages: int = 2  # v: chunks per rank in interleaved 1F1B
    schedule_width: int = 1024  # real compute: K·v blocks this wide (~5 ms forward per block
    # on 128 samples): 4 schedules x 5 steps x 2 clocks in about 12 s on 2 cores
    schedule_micro_batch_size: int = 128
    # steps per schedule, taking turns; the least idle counts. With 2, interleaved's real
    # bubble was 39% and 79% over its play-out in 2 of 5 runs (one slow hand-off in every
    # step); with 6, at most 18% in 6 runs (2026-11-26). 5, as bench pipeline takes.
    schedule_repeats: int = 5
    twin_steps: int = 3  # SGD steps of the course's engine and of PyTorch's, against one process
    twin_lr: float = 0.1


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


def _tiny_transformer() -> TransformerSizes:
    return TransformerSizes(vocab=16, width=16, heads=2, blocks=2, seq_len=8, batch=8, steps=5)


@dataclass(frozen=True)
class MeshSizes:
    """Notebook 11: a 3D device mesh, the same job under torchrun, the mesh exercise.

    `shape` is read in the order of `dims`: (dp, pp, tp) puts the tensor-parallel pairs on
    neighbouring ranks (one machine) and the data-parallel replicas furthest apart."""

    model: TransformerSizes = field(default_factory=_tiny_transformer)
    shape: tuple[int, ...] = (2, 2, 2)
    dims: tuple[str, ...] = ("dp", "pp", "tp")
    microbatches: int = 2  # GPipe's M per step, in each data-parallel replica
    steps: int = 5  # SGD steps before every shard is compared with one process
    optimizer: str = "sgd"  # momentum 0.9, as one process trains; "adam": the planner's check
    persistent_grads: bool = False  # zeroed in place between steps, as DDP's gradient buckets
    # are (the planner counts gradients as held all step), instead of freed
    tolerance: float = 1e-5  # fp32 agreement with one process
    timeout: float = 120.0  # one launch of the whole mesh
    seed: int = 0

    @property
    def world_size(self) -> int:
        return math.prod(self.shape)
