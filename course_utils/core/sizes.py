"""The sizes of each chapter's experiments, one dataclass per chapter (those of the chapters
that split one model across ranks, 06, 10 and 11, are in `sizes_model_parallel`).

The defaults are the `cpu` profile's (every notebook under 2 minutes on 2 cores); a
profile in `profiles` overrides what it runs bigger.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SgdSizes:
    """Notebook 01: GD vs SGD vs mini-batch, gradient noise, the batch-size sweep, the search."""

    # the report's batch-size sweep at a constant learning rate, and its parallel search
    epochs: int = 10
    batch_sizes: tuple[int, ...] = (8, 32, 128, 512)
    lr: float = 0.001
    momentum: float = 0.9
    optimizer: str = "sgd"
    hidden: int | None = None  # model width; None keeps the model's own default
    val_fraction: float = 0.2
    threads: int | None = 1  # torch threads per training process; None leaves torch's choice
    sweep_jobs: int = 2
    sweep_seeds: tuple[int, ...] = (0,)  # each batch size trained once per seed
    timing_attempts: int = 3  # on a busy machine, time both searches again, keep the best
    search_share: float = 0.6  # of the ideal speedup; other busy programs lower what is reachable
    # full-batch GD, batch-1 SGD and mini-batch SGD on the same samples at one lr
    compare_samples: int | None = None  # training samples they share; None: the whole split
    compare_lr: float = 0.05
    gd_steps: int = 200
    sgd_steps: int = 3000  # batch-1 updates: a bounded part of one pass
    minibatch_size: int = 32
    minibatch_epochs: int = 4
    curve_points: int = 50  # loss evaluations along each run
    path_updates: int = 50  # updates along which the full-data loss is followed, each method
    race_lrs: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)  # each method's lr search
    # gradient noise against the 1/B law
    noise_batch_sizes: tuple[int, ...] = (1, 4, 16, 64, 256, 1024)
    noise_draws: int = 64
    # updates to a target training loss against the batch (Shallue et al.), its bend
    critical_batch_sizes: tuple[int, ...] = (8, 32, 128, 512, 2048)
    critical_base_lr: float = 0.01  # at the smallest batch; scaled linearly, then capped
    critical_lr_factors: tuple[float, ...] = (0.5, 1.0, 2.0)  # the lrs each batch tries
    critical_lr_cap: float = 1.28  # reaches the target at 512 and 2048; 2.56 stalls (notebook 03)
    critical_target: float = 1.0  # full-data training loss to reach (chance: 2.3)
    critical_check_samples: int = 512  # samples between two checks of the loss
    critical_max_samples: int = 200_000  # not at the target by then: counts as never
    critical_seeds: tuple[int, ...] = (0, 1)  # every batch size and lr, once per seed
    critical_factor: float = 1.5  # B_crit within this of B_simple; the seeds' fits span 1.39x


@dataclass(frozen=True)
class CollectivesSizes:
    """Notebook 05: allreduce algorithms and their cost model."""

    world_sizes: tuple[int, ...] = (2, 4, 8)  # the timing sweep (simulated clock); bench: 2..8
    message_bytes: tuple[int, ...] = (1 << 10, 1 << 14, 1 << 18, 1 << 21)
    repeats: int = 3  # the fastest of this many timed runs counts
    # the real link, 2 ranks: 1 KiB to 16 MiB, so both ends of the alpha-beta line show
    pingpong_bytes: tuple[int, ...] = (1 << 10, 1 << 14, 1 << 18, 1 << 21, 1 << 24)
    pingpong_repeats: int = 15  # the fastest of many: a peer's wake-up varies 0.1-0.7 ms
    # the simulator against the real link (2 ranks, a core each): design.md's 1 MiB and up
    simulator_bytes: tuple[int, ...] = (1 << 20, 1 << 22, 1 << 24)
    simulator_repeats: int = 5
    simulator_fits: int = 3  # one fit on loopback can be a third off; a row is their median
    # nccl-tests' sweep, 4 KiB to 64 MiB, on the real and the profile's link; over the cpu
    # profile's 100 Mbit/s a 64 MiB allreduce on 2 ranks takes ~5.4 s, so few sizes
    busbw_bytes: tuple[int, ...] = (1 << 12, 1 << 16, 1 << 20, 1 << 24, 1 << 26)
    busbw_world_size: int = 2  # no more ranks than cores: the real link is timed too
    check_world_sizes: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8)  # against dist.all_reduce
    check_numels: tuple[int, ...] = (1, 5, 1001)  # smaller than N, odd, larger
    check_dtypes: tuple[str, ...] = ("float32", "float64", "int64")
    exercise_timeout: float = 5.0  # seconds before a deadlocked exercise is stopped


@dataclass(frozen=True)
class DataParallelSizes:
    """Notebook 04: DDP's equivalence with one big batch, lr scaling, the cost of communication."""

    hidden: int = 64  # width of the MLP every run trains
    per_rank_batch: int = 8  # the report's 4 x 8 = 32
    lr: float = 0.05
    equivalence_steps: int = 20
    compare_epochs: int = 4  # the report's DDP run against one process
    scaling_world_size: int = 2  # ranks of the lr-scaling runs (effective batch = ranks x b)
    scaling_per_rank_batches: tuple[int, ...] = (4, 16, 64, 256)
    scaling_base_lr: float = 0.05  # at the smallest effective batch
    scaling_epochs: int = 3
    overhead_world_size: int = 2  # no more ranks than cores: compute stays honest
    overhead_per_rank_batch: int = 16  # small, as in a naive run: a sync every few samples
    overhead_samples_per_rank: int = 512
    accumulate: int = 4  # no_sync: 4 micro-batches of 4, the same effective batch
    fabric_presets: tuple[str, ...] = ("1gbe", "10gbe")  # naive DDP predicted on real fabrics
    overlap_link: str = "1gbit,1ms"  # all-reduces a few times the backward pass: all of it can hide
    split_global_batch: int = 1024  # the lecture's question
    split_world_sizes: tuple[int, ...] = (1, 2, 4, 8)
    split_samples_per_rank: int = 4096
    lecture_layouts: tuple[tuple[int, int], ...] = ((1024, 1), (16, 64))  # (ranks, batch)
    trace_batch: int = 256  # the profiled DDP step (6 layers of 512, over overlap_link)
    strong_world_sizes: tuple[int, ...] = (1, 2, 4, 8)
    strong_global_batches: tuple[int, ...] = (4096, 32768)  # too little and enough compute
    strong_width: int = 128  # 3 layers of 128: a gradient of 137 KB
    strong_steps: int = 4  # a step's CPU time falls over the first few: the least of 4 counts


@dataclass(frozen=True)
class ParamServerSizes:
    """Notebook 07: parameter servers, asynchronous SGD, parameter averaging, a lost worker."""

    dataset: str = "mnist1d"  # the servers run on CPU over gloo in every profile
    model: str = "mlp"
    hidden: int = 64
    workers: int = 3
    batch_size: int = 32
    gradients: int = 300  # gradients computed per run (async: updates; sync: / workers)
    lr: float = 0.3
    lr_grid: tuple[float, ...] = (0.1, 0.3, 1.0, 2.0)
    lr_seeds: tuple[int, ...] = (0, 1, 2)  # each lr is judged by its mean over these
    val_fraction: float = 0.2  # of the training set, held out to choose the lr on
    target_loss: float = 1.65  # validation loss whose epochs-to-reach are compared
    straggler_delay: float = 0.04  # s more per gradient, last worker: > a sync update's 0.03
    worker_timeout: float = 2.0  # seconds of silence before a server gives a worker up
    snapshot_every: int = 10  # updates between kept copies of the parameters
    eval_samples: int = 2000  # test samples each kept copy is evaluated on
    compare_updates: int = 100  # synchronous server against allreduce and one process
    traffic_workers: tuple[int, ...] = (2, 3, 4)
    scaling_workers: tuple[int, ...] = (2, 4)  # sync server time per update, over the link
    scaling_servers: tuple[int, ...] = (1, 2, 4)
    scaling_hidden: int = 512  # a model big enough that its bytes, not latency, load the link
    scaling_updates: int = 6
    traffic_updates: int = 5
    kill_worker: int = 2
    kill_after: int = 30  # gradients the doomed worker pushes before it is killed
    averaging_steps: int = 400  # local steps per worker
    averaging_lr: float = 0.3
    average_every: tuple[int, ...] = (1, 8, 32)
    timeout: float = 60.0  # one launch


@dataclass(frozen=True)
class SharpMinimaSizes:
    """Notebook 02: small- and large-batch runs trained until they fit, and their sharpness."""

    model: str | None = None  # None: the profile's model
    hidden: int | None = 128
    val_fraction: float = 0.2
    train_samples: int | None = None  # of the training split the runs must fit; None: all
    small_batch: int = 32
    large_batch: int = 1024
    small_lr: float = 0.01
    large_lr: float = 0.05  # fewer, less noisy steps take a larger lr (and fit in fewer)
    warmup_updates: int = 20  # arms with a warmup reach their lr after this many updates
    optimizer: str = "sgd"
    momentum: float = 0.9
    fit_loss: float = 0.05  # train until the training loss is below this (every arm alike)
    fit_accuracy: float = 0.98  # ...which must then mean this share classified correctly (the
    # runs stop at loss < fit_loss: 98.8-99.9% right on two processors, so 0.99 sat on the edge)
    check_every_steps: int = 50  # updates between checks of the fit (rounded up to passes)
    max_steps: int = 60_000  # a run that has not fit by then stops unfitted
    seeds: tuple[int, ...] = (0, 1, 2)
    # the small batch at the large batch's lr/B fits in ~5x the updates of any other arm
    # (42,200-43,000 on cpu, against 8,600-9,000 at its own lr): it runs on these seeds only
    slow_arm_seeds: tuple[int, ...] = (0,)  # one: it costs as much as all the other trials
    epsilon: float = 1e-3  # Keskar's box: each weight may move by epsilon * (|w| + 1)
    ascent_steps: int = 20
    hessian_iters: int = 30  # power-iteration steps for the top eigenvalue
    measure_samples: int | None = 2000  # training samples the sharpness is measured on
    line_range: tuple[float, float] = (-1.0, 2.0)  # alpha: 0 is the small-, 1 the large-batch end
    line_points: int = 31
    valley_rise: float = 1.0  # nats of training loss that end a valley, walking outward
    sweep_jobs: int = 2
    threads: int | None = 1


@dataclass(frozen=True)
class ScalingSizes:
    """Notebook 03: the linear lr scaling rule from a small base batch, warmup, its limit."""

    model: str | None = None  # None: the profile's model
    hidden: int | None = 128
    val_fraction: float = 0.2
    base_batch: int = 8  # the report's
    base_lr: float = 0.01
    momentum: float = 0.9
    batch_sizes: tuple[int, ...] = (8, 32, 128, 512, 1024, 2048)
    epochs: int = 15
    warmup_updates: int = 20  # Goyal et al. warm up over 5 of 90 epochs; here, in updates
    seeds: tuple[int, ...] = (0, 1, 2)  # every accuracy below is a mean over these
    stall_loss: float = 1.5  # a run whose full-data training loss ends above this stalled (2.3:
    # chance); a rule trains a batch size only if no seed's run stalls
    tolerance: float = 0.02  # "kept": mean test accuracy at most this far below the base batch's
    at_least: int = 16  # the rule must keep the accuracy up to this multiple of the base batch
    noise_factor: float = 1.25  # B_simple may lie this far outside [limit, first batch lost]:
    # the 3 seeds' values span 1.55x (463-719); 1.25 is twice their mean's standard error, 13%
    noise_scale: bool = True  # measure B_noise at the base batch's solution (notebook 01)
    sweep_jobs: int = 2
    threads: int | None = 1


@dataclass(frozen=True)
class MemorySizes:
    """Notebook 08: where each rank's bytes go; ZeRO-1/2/3 by hand, FSDP2, precision, recompute.

    Every experiment counts bytes on CPU tensors over gloo, so it is the same in every profile.
    """

    dataset: str = "mnist1d"
    widths: tuple[int, ...] = (40, 256, 256, 256, 10)  # the MLP every ZeRO stage trains
    batch_per_rank: int = 32
    steps: int = 20  # then the parameters are compared with DDP's
    lr: float = 1e-3  # Adam
    world_sizes: tuple[int, ...] = (1, 2, 4)
    anatomy_world_size: int = 2
    fsdp_world_size: int = 4  # on 2 ranks FSDP2 = ZeRO-3 would be a + b = b + a
    fsdp_settings_world_size: int = 2  # reshard_after_forward and MixedPrecisionPolicy
    precision_epochs: int = 5  # fp32 against bf16 autocast, same batches
    precision_batch: int = 64
    precision_hidden: int = 256
    loss_shrink: float = 2.0**-20  # makes a small model's gradients as small as a large one's
    loss_scale: float = 2.0**16  # GradScaler's starting scale
    small_terms: int = 10_000  # fp16 additions of one small value
    small_value: float = 1e-4
    recompute_blocks: int = 8  # residual MLP blocks in the checkpointing model
    recompute_width: int = 128
    recompute_batch: int = 512
    recompute_every: tuple[int, ...] = (0, 4, 2, 1)  # checkpoint every k-th block; 0: none
    recompute_repeats: int = 21  # timed steps per variant, interleaved: the median of 5, and
    # once in ~8 fresh clones of 11, put recomputing every block past 1.5 forward passes


@dataclass(frozen=True)
class FailuresSizes:
    """Notebook 09: checkpoints, resume, elastic restarts, resharding, and finding a culprit."""

    world_size: int = 4  # ranks of the DDP run that is checkpointed, killed and resumed
    hidden: int = 64
    train_samples: int = 1024  # a small training set, so the runs cross epoch boundaries
    global_batch: int = 64  # samples per update over all ranks (any world size, same batches)
    lr: float = 0.05
    momentum: float = 0.9
    noise: float = 0.05  # augmentation noise each rank draws from its own RNG
    steps: int = 40
    every: int = 8  # updates between checkpoints
    kill_rank: int = 2
    kill_at: int = 29  # the update after which that rank is SIGKILLed
    reshard_world_size: int = 2
    young_intervals: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    young_steps: int = 32  # updates timed for each checkpoint interval
    mtbf_steps: int = 50  # mean updates between failures, for Young's formula
    nodes: int = 2  # torchrun agents of the elastic run (one rank each)
    max_restarts: int = 1
    elastic_steps: int = 24
    elastic_kill_at: int = 13
    elastic_kill_rank: int = 1
    hang_rank: int = 2
    barrier_timeout: float = 1.5  # seconds monitored_barrier waits for a missing rank
    hang_timeout: float = 4.0  # seconds before the launcher dumps every rank's stack
    straggler_rank: int = 3
    straggler_delay: float = 0.04  # extra seconds per update on the slow rank
    straggler_steps: int = 20
    check_every: int = 4  # updates between cross-rank checksums
    check_steps: int = 40
    threads: int = 1
    timeout: float = 60.0  # one launch
