"""What the planner plans for: a model's shape, a cluster, and their presets.

Plain frozen dataclasses, so a notebook can `replace` one field and plan again. The
presets are the course's own transformer (notebook 10's `TransformerSizes`) and
Llama-3 8B and 70B with their published shapes (Dubey et al. 2024, "The Llama 3 Herd of
Models", Table 3: 32 layers x 4096 wide, 32 heads, 8 KV heads, FFN 14336; 80 x 8192, 64
heads, 8 KV heads, FFN 28672; vocabulary 128256; untied embeddings), and clusters written
`NODESxGPUS:KIND` (`8x8:h100`: 8 nodes of 8 GPUs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.sizes_model_parallel import TransformerSizes
from ..network.fabric import PRESETS, Link, parse

# what the planner's precision names mean in chapter 08's formulas (`memory.formulas`)
_PRECISIONS = {"fp32": "fp32", "bf16": "mixed", "mixed": "mixed"}
ACTIVATION_BYTES = {"fp32": 4, "mixed": 2}


def precision_key(precision: str) -> str:
    """'fp32' or 'mixed' (bf16 weights and gradients, fp32 master copy and Adam moments)."""
    if precision not in _PRECISIONS:
        raise ValueError(
            f"unknown precision {precision!r}: use 'fp32' (weights, gradients and Adam in "
            "fp32) or 'bf16' (bf16 weights and gradients with an fp32 master copy and Adam)."
        )
    return _PRECISIONS[precision]


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer as the planner sees it.

    `params`: all parameters; `block_params`: one transformer block's (what TP splits
    and a pipeline stage holds layers of); `largest_unit`: the most parameters gathered
    or reduced at once (a block, or the embedding if larger), for chapter 08's working
    set. `global_batch` is in sequences of `seq` tokens per optimizer step.
    `activations`: where measured, the bytes one block keeps for backward per token and
    unit of width, (kept whole on every TP rank, split over TP); None: Korthikanti's formula.
    """

    name: str
    params: float
    block_params: float
    layers: int
    hidden: int
    heads: int
    seq: int
    global_batch: int
    vocab: int
    activations: tuple[float, float] | None = None

    def __post_init__(self):
        for field in ("layers", "hidden", "heads", "seq", "global_batch", "vocab"):
            value = getattr(self, field)
            if not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"model {self.name!r}: {field} must be a positive int, got {value!r}."
                )
        if self.params <= 0 or not 0 < self.block_params <= self.params:
            raise ValueError(
                f"model {self.name!r}: params ({self.params:g}) must be positive and at least "
                f"block_params ({self.block_params:g})."
            )
        if self.hidden % self.heads:
            raise ValueError(
                f"model {self.name!r}: hidden {self.hidden} is not divisible by heads {self.heads}."
            )

    @property
    def largest_unit(self) -> float:
        return max(self.block_params, self.vocab * self.hidden)

    def forward_flops_per_token(self, tp: int = 1, pp: int = 1) -> float:
        """One rank's forward FLOPs per token: 2 per parameter of its TP x PP shard, plus
        attention's scores and weighted sum, 4·seq·hidden per layer, which counting
        parameters leaves out (Chowdhery et al. 2022, appendix B: 6N + 12·L·H·Q·T for a
        training step, forward and backward). For Llama-3 8B at sequence 8192 the
        attention adds 27% to 6N, for 70B 15%."""
        return (2 * self.params + 4 * self.layers * self.seq * self.hidden) / (tp * pp)


def course_model(sizes: TransformerSizes | None = None) -> Model:
    """Notebook 10's transformer (`transformer.model.Transformer`), counted exactly: token
    and position embeddings, blocks of four biased projections, a biased MLP and two
    LayerNorms, a final LayerNorm and an untied, unbiased head."""
    s = sizes or TransformerSizes()
    w, hidden = s.width, s.mlp_ratio * s.width
    block = 4 * (w * w + w) + (w * hidden + hidden) + (hidden * w + w) + 2 * 2 * w
    total = s.vocab * w + s.seq_len * w + s.blocks * block + 2 * w + w * s.vocab
    return Model("course", total, block, s.blocks, w, s.heads, s.seq_len, s.batch, s.vocab)


def llama_model(
    name: str, layers: int, hidden: int, heads: int, kv_heads: int, ffn: int,
    vocab: int = 128256, seq: int = 8192, global_batch: int = 512,
) -> Model:  # fmt: skip
    """A Llama-3-shaped model: grouped-query attention, SwiGLU MLP (three matrices), RMSNorm,
    untied embeddings. The default batch (512 sequences of 8192, 4.2M tokens) is an
    assumption: Meta gives no per-step batch for 8B and 70B."""
    head_dim = hidden // heads
    block = 2 * hidden * hidden + 2 * hidden * kv_heads * head_dim + 3 * hidden * ffn + 2 * hidden
    total = layers * block + 2 * vocab * hidden + hidden
    return Model(name, total, block, layers, hidden, heads, seq, global_batch, vocab)


MODEL_PRESETS = {
    "course": course_model,
    "llama3-8b": lambda: llama_model("llama3-8b", 32, 4096, 32, 8, 14336),
    "llama3-70b": lambda: llama_model("llama3-70b", 80, 8192, 64, 8, 28672),
}


def model(name: str | Model) -> Model:
    """A preset by name ('course', 'llama3-8b', 'llama3-70b'), or the Model given."""
    if isinstance(name, Model):
        return name
    if name not in MODEL_PRESETS:
        raise ValueError(f"unknown model {name!r}: use one of {', '.join(MODEL_PRESETS)}.")
    return MODEL_PRESETS[name]()


@dataclass(frozen=True)
class Cluster:
    """`nodes` x `gpus_per_node` devices with `memory_bytes` each and an achieved (not
    peak) `flops` per second at the planned precision; `intra` links the devices of a
    node (NVLink), `inter` the nodes (InfiniBand), one network card per device."""

    name: str
    nodes: int
    gpus_per_node: int
    memory_bytes: float
    flops: float
    intra: Link
    inter: Link

    def __post_init__(self):
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError(f"cluster {self.name!r}: nodes and GPUs per node must be at least 1.")
        if self.memory_bytes <= 0 or self.flops <= 0:
            raise ValueError(f"cluster {self.name!r}: memory and FLOP rate must be positive.")

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def link(self, span: int) -> Link:
        """The link a group of `span` consecutive ranks crosses: NVLink inside a node."""
        return self.intra if span <= self.gpus_per_node else self.inter


# H100 SXM: 80 GB; 400 TFLOP/s in bf16 is an ASSUMPTION of what a tuned training step
# achieves (about 40% of the 989 TFLOP/s dense peak, the MFU torchtitan and Megatron
# report); NVLink 4 inside a node, InfiniBand NDR 400 Gbit/s per GPU across nodes.
GPU_KINDS = {
    "h100": {"memory_bytes": 80e9, "flops": 400e12, "intra": "nvlink4", "inter": "ib-ndr"},
    "cpu": {"memory_bytes": None, "flops": None, "intra": None, "inter": None},
}
_CLUSTER = re.compile(r"(\d+)x(\d+):([a-z0-9-]+)")


def cluster(
    spec: str | Cluster,
    memory_gb: float | None = None,
    tflops: float | None = None,
    intra: str | Link | None = None,
    inter: str | Link | None = None,
) -> Cluster:
    """'NODESxGPUS:KIND', e.g. '8x8:h100' or '1x8:cpu', with any field overridden.

    KIND 'h100' is the preset above. 'cpu' is this machine as the course runs it: ranks
    share its memory, its FLOP rate is measured (`measured_flops`), and both links are the
    profile's simulated link, the one the notebooks' simulated runs cross.
    """
    if isinstance(spec, Cluster):
        return spec
    found = _CLUSTER.fullmatch(str(spec).strip().lower())
    if not found or found.group(3) not in GPU_KINDS:
        raise ValueError(
            f"unknown cluster {spec!r}: write NODESxGPUS:KIND, e.g. '8x8:h100' (8 nodes of 8 "
            f"GPUs) or '1x8:cpu', with KIND one of {', '.join(GPU_KINDS)}."
        )
    nodes, per_node, kind = int(found.group(1)), int(found.group(2)), found.group(3)
    base = dict(GPU_KINDS[kind])
    if kind == "cpu":
        import psutil

        from ..core.profiles import simulated_link

        base["memory_bytes"] = psutil.virtual_memory().total / (nodes * per_node)
        base["intra"] = base["inter"] = simulated_link()
        base["flops"] = None if tflops else measured_flops()
    return Cluster(
        name=f"{nodes}x{per_node}:{kind}",
        nodes=nodes,
        gpus_per_node=per_node,
        memory_bytes=memory_gb * 1e9 if memory_gb else base["memory_bytes"],
        flops=tflops * 1e12 if tflops else base["flops"],
        intra=_link(intra or base["intra"]),
        inter=_link(inter or base["inter"]),
    )


def _link(spec: str | Link) -> Link:
    if isinstance(spec, Link):
        return spec
    try:
        return parse(spec)
    except ValueError as exc:
        raise ValueError(f"{exc} Presets: {', '.join(PRESETS)}.") from None


def measured_flops(size: int = 256, repeats: int = 20) -> float:
    """FLOP/s of one thread multiplying fp32 matrices here: what a CPU rank of the course
    achieves (the ranks run one thread each), for a 'cpu' cluster."""
    import time

    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)  # cpu: measuring this machine
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a @ b
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        seconds = time.perf_counter() - start
    finally:
        torch.set_num_threads(before)
    return 2 * size**3 * repeats / seconds
