"""The planner's accounting: the bytes one rank holds and the seconds one step takes.

Memory per rank = chapter 08's model states (`memory.formulas.model_state_bytes`, the
ZeRO paper's (p + g + k)Ψ with Ψ = params / (TP x PP) and ZeRO dividing by DP) + the
activations of the micro-batches in flight + chapter 08's working set
(`memory.formulas.working_set_bytes`, as `memory.calculator.per_rank_bytes` adds it).

Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", eq. 1-2, Table 2): one block keeps s·b·h·(34 + 5·a·s/h) bytes of
16-bit activations, all divided by t under tensor + sequence parallelism; selective
recomputation keeps 34·s·b·h/t, full recomputation only the block's input 2·s·b·h/t; the
output layer adds 4·s·b·(h + v)/t. fp32 activations count twice as much. The formula is
written for a GPT block with a 4h MLP and dropout; for Llama's SwiGLU it is an estimate.

Step time = compute (6·Ψ·tokens per FLOP rate, plus attention's 12·layers·seq·hidden per
token (`Model.forward_flops_per_token`); 8 with full recomputation) + TP's
collectives + pipeline hand-offs + the bubble + the DP/FSDP traffic that backward cannot
hide, every collective a ring paying α + n/β per message (`network.fabric`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..memory.formulas import block_activation_bytes as korthikanti
from ..memory.formulas import model_state_bytes, per_parameter, working_set_bytes
from ..model_parallel.schedules import bubble_formula, handoffs_per_step, interleaved_bubble_formula
from ..network.fabric import ring_allreduce_seconds
from .plan_model import ACTIVATION_BYTES, Cluster, Model, precision_key

SCHEDULES = ("none", "gpipe", "1f1b", "interleaved")
RECOMPUTE = ("none", "selective", "full")
INTERLEAVED_CHUNKS = 2  # virtual stages per rank in the interleaved schedule


@dataclass(frozen=True)
class Layout:
    """DP x TP x PP ranks; ZeRO stage of the DP dimension (0 DDP, 1, 2, 3 = FSDP); the
    pipeline schedule ('none' without PP); `microbatches` of `micro_batch` sequences per DP
    rank per step; activation recomputation ('none', 'selective', 'full')."""

    dp: int
    tp: int
    pp: int
    zero: int = 0
    schedule: str = "none"
    microbatches: int = 1
    micro_batch: int = 1
    recompute: str = "none"
    dp_overlap: bool = True  # DDP and ZeRO-1/2: the reduction hides behind backward (False:
    # it starts once backward is done, as `mesh3d.sync_dp` does)

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def chunks(self) -> int:
        return INTERLEAVED_CHUNKS if self.schedule == "interleaved" else 1

    @property
    def name(self) -> str:
        dp = (
            f"fsdp{self.dp}"
            if self.zero == 3
            else f"dp{self.dp}" + (f"z{self.zero}" if self.zero else "")
        )
        pp = f"pp{self.pp}-{self.schedule}" if self.pp > 1 else "pp1"
        rc = "" if self.recompute == "none" else f"-rc{self.recompute[0]}"
        return f"{dp}-tp{self.tp}-{pp}-m{self.microbatches}x{self.micro_batch}{rc}"

    def as_dict(self) -> dict:
        return {"name": self.name, **asdict(self)}


def check(model: Model, cluster: Cluster, layout: Layout) -> None:
    """Raise ValueError naming what to change if `layout` cannot run `model` on `cluster`."""
    if layout.gpus > cluster.gpus:
        raise ValueError(
            f"{layout.name} uses {layout.gpus} GPUs but the cluster {cluster.name} has "
            f"{cluster.gpus}: lower DP x TP x PP or add nodes."
        )
    if model.heads % layout.tp:
        raise ValueError(
            f"TP {layout.tp} does not divide the {model.heads} heads: choose a divisor."
        )
    if layout.tp > cluster.gpus_per_node:
        raise ValueError(
            f"TP {layout.tp} spans more than a node ({cluster.gpus_per_node} GPUs): keep TP "
            "inside a node, where NVLink carries its per-layer collectives."
        )
    if layout.schedule not in SCHEDULES or (layout.schedule == "none") != (layout.pp == 1):
        raise ValueError(
            f"schedule {layout.schedule!r} with PP {layout.pp}: use 'none' without PP, else "
            f"one of {', '.join(SCHEDULES[1:])}."
        )
    if model.layers % (layout.pp * layout.chunks):
        raise ValueError(
            f"{model.layers} layers do not split into PP {layout.pp} x {layout.chunks} chunks: "
            "choose a PP degree (and schedule) that divides the layers."
        )
    if layout.schedule == "interleaved" and layout.microbatches % layout.pp:
        raise ValueError(
            f"the interleaved schedule needs micro-batches ({layout.microbatches}) divisible by "
            f"PP {layout.pp}: change the micro-batch size or count."
        )
    if layout.dp * layout.microbatches * layout.micro_batch != model.global_batch:
        raise ValueError(
            f"DP {layout.dp} x {layout.microbatches} micro-batches x {layout.micro_batch} "
            f"sequences is not the global batch {model.global_batch}: change one of them."
        )
    if layout.zero not in (0, 1, 2, 3) or layout.recompute not in RECOMPUTE:
        raise ValueError(f"ZeRO stage must be 0-3 and recompute one of {', '.join(RECOMPUTE)}.")


@dataclass(frozen=True)
class Memory:
    """Bytes one rank holds at a step's peak (the pipeline's first stage, the fullest)."""

    params: float
    grads: float
    optimizer: float
    activations: float
    working_set: float

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer + self.activations + self.working_set

    def as_dict(self) -> dict:
        return {**asdict(self), "total": self.total}


def block_activation_bytes(model: Model, layout: Layout, precision: str) -> float:
    """Korthikanti et al. 2022: one block, one micro-batch, with TP + sequence parallelism;
    or, without recomputation, the model's own measured bytes (`Model.activations`)."""
    s, b, h, a, t = model.seq, layout.micro_batch, model.hidden, model.heads, layout.tp
    if model.activations and layout.recompute == "none":
        whole, split = model.activations
        return s * b * h * (whole + split / t)
    bf16 = korthikanti(s, b, h, a, layout.recompute, t)  # bytes of 16-bit values
    return bf16 * ACTIVATION_BYTES[precision_key(precision)] / 2


def layers_in_flight(model: Model, layout: Layout) -> float:
    """Block-micro-batches whose activations the first stage holds at once: GPipe all M
    micro-batches of its L/K blocks; 1F1B at most K; interleaved 1F1B K·(1 + (K-1)/(K·v))
    (Korthikanti et al. 2022, sec. 4.2.3); without PP one micro-batch of all L blocks."""
    k, m, per_stage = layout.pp, layout.microbatches, model.layers / layout.pp
    if layout.schedule == "gpipe":
        return m * per_stage
    held = min(m, k) * per_stage
    if layout.schedule == "interleaved":
        held *= 1 + (k - 1) / (k * layout.chunks)
    return held


def handoff_bytes(model: Model, layout: Layout, precision: str) -> float:
    """A pipeline stage's buffers during a micro-batch's backward: the gradient it received
    for its output and the one it sends for its input, a micro-batch's activation between
    blocks each (whole on every TP rank); one process never holds them apart."""
    if layout.pp == 1:
        return 0.0
    return (
        2
        * model.seq
        * layout.micro_batch
        * model.hidden
        * ACTIVATION_BYTES[precision_key(precision)]
    )


def memory(model: Model, layout: Layout, precision: str = "bf16") -> Memory:
    key = precision_key(precision)
    shard = model.params / (layout.tp * layout.pp)
    states = model_state_bytes(shard, layout.dp, layout.zero, key, parts=True)
    act_bytes = ACTIVATION_BYTES[key] / 2
    logits = 4 * model.seq * layout.micro_batch * (model.hidden + model.vocab) / layout.tp
    activations = (
        layers_in_flight(model, layout) * block_activation_bytes(model, layout, precision)
        + logits * act_bytes
    )
    largest = model.largest_unit / layout.tp
    working = working_set_bytes(
        layout.dp, layout.zero, largest, activations, grad_bytes=per_parameter(key)[1],
        in_backward=handoff_bytes(model, layout, precision),
    )  # fmt: skip
    return Memory(states["params"], states["grads"], states["optimizer"], activations, working)


@dataclass(frozen=True)
class StepTime:
    """Seconds of one optimizer step: compute (recomputation included), TP collectives,
    pipeline hand-offs, the pipeline's idle bubble, and the DP/FSDP traffic left exposed
    (`dp_traffic` is all of it, before backward hides what it can)."""

    compute: float
    tp: float
    pp: float
    bubble: float
    dp: float
    dp_traffic: float

    @property
    def total(self) -> float:
        return self.compute + self.tp + self.pp + self.bubble + self.dp

    def as_dict(self) -> dict:
        return {**asdict(self), "total": self.total}


def bubble_fraction(layout: Layout) -> float:
    """Chapter 06: (K-1)/(M+K-1) for GPipe and 1F1B, (K-1)/(v·M+K-1) interleaved."""
    if layout.pp == 1:
        return 0.0
    if layout.schedule == "interleaved":
        return interleaved_bubble_formula(layout.pp, layout.microbatches, layout.chunks)
    return bubble_formula(layout.pp, layout.microbatches)


def step_time(model: Model, cluster: Cluster, layout: Layout, precision: str = "bf16") -> StepTime:
    """The predicted seconds of one step, by part (module docstring); checks the layout."""
    check(model, cluster, layout)
    return timed(model, cluster, layout, precision)


def timed(model: Model, cluster: Cluster, layout: Layout, precision: str) -> StepTime:
    """`step_time` for a layout known to be valid (the planner's own, built to be)."""
    key = precision_key(precision)
    m, t = layout.microbatches, layout.tp
    shard = model.params / (t * layout.pp)
    tokens = model.seq * layout.micro_batch
    # one micro-batch on one rank
    forward = model.forward_flops_per_token(t, layout.pp) * tokens / cluster.flops
    backward = 2 * forward + (forward if layout.recompute == "full" else 0.0)
    # TP: 2 all-reduces of b·s·h forward and 2 backward per block (all-gather +
    # reduce-scatter under SP, the same bytes), 2 more when full recomputation reruns it
    message = tokens * model.hidden * ACTIVATION_BYTES[key]
    per_block = (4 + (2 if layout.recompute == "full" else 0)) * ring_allreduce_seconds(
        cluster.intra, message, t
    )
    tp = m * model.layers / layout.pp * per_block
    compute = m * (forward + backward)
    bubble_share = bubble_fraction(layout)
    bubble = (compute + tp) * bubble_share / (1 - bubble_share)
    # PP: a rank's share of the hand-offs (activation forward, gradient back; each TP rank
    # sends its 1/t slice), not hidden behind compute
    span = layout.dp * t
    sends = handoffs_per_step(layout.pp, m, layout.chunks) / layout.pp if layout.pp > 1 else 0
    pp = sends * cluster.link(span * layout.pp).wire_seconds(message / t)
    traffic, exposed = _dp_seconds(cluster, layout, shard, key, forward, backward)
    return StepTime(compute, tp, pp, bubble, exposed, traffic)


def _dp_seconds(cluster, layout, shard, key, forward, backward) -> tuple[float, float]:
    """All the DP traffic, and what backward leaves exposed. DDP and ZeRO-1/2 reduce the
    accumulated gradients once, during the last micro-batch's backward (`no_sync` before,
    Li et al. 2020); FSDP gathers the weights for every micro-batch's forward and backward,
    each hidden behind that pass, and reduce-scatters the gradients in the last backward."""
    if layout.dp == 1:
        return 0.0, 0.0
    link = cluster.link(layout.dp * layout.tp)
    p, g, _ = per_parameter(key)
    if layout.zero < 3:
        reduce = ring_allreduce_seconds(link, shard * g, layout.dp)
        return reduce, max(0.0, reduce - backward) if layout.dp_overlap else reduce
    gather = ring_allreduce_seconds(link, shard * p, layout.dp) / 2
    scatter = ring_allreduce_seconds(link, shard * g, layout.dp) / 2
    m = layout.microbatches
    exposed = (
        m * max(0.0, gather - forward)
        + (m - 1) * max(0.0, gather - backward)
        + max(0.0, gather + scatter - backward)
    )
    return 2 * m * gather + scatter, exposed
