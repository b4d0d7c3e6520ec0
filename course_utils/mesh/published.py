"""The planner beside the layouts published for Llama-3 8B and 70B on 64 to 512 GPUs.

The cluster is H100-class: 80 GB, 8 per node, NVLink 4 inside, InfiniBand NDR across,
and 400 TFLOP/s achieved in bf16, an ASSUMPTION (`plan_model.GPU_KINDS`). Each published
layout is costed by the same accounting as the planner's own, so a disagreement is
explained in the planner's terms: the seconds it predicts for both, or why it thinks the
published one does not fit. Where no layout was found for a size it says so; nothing is
filled in.

Sources (read 2026, quoted in `PUBLISHED`):
- torchtitan, "Llama 3.1 on H100, 2024-12"
  https://github.com/pytorch/torchtitan/blob/main/benchmarks/llama3_h100_202412_torchtitan.md
  (Grand Teton H100s with 96 GB HBM2e, 400 Gb/s RDMA per GPU; Tables 3 and 4).
- torchtitan, docs/performance.md (64 A100 80 GB, FSDP2 only)
  https://github.com/pytorch/torchtitan/blob/main/docs/performance.md
- torchtitan, llama3_70b.toml ("a preset for 64 A100 GPUs")
  https://github.com/pytorch/torchtitan/blob/main/torchtitan/models/llama3/train_configs/llama3_70b.toml
- NVIDIA Megatron-Bridge H100 performance recipes for Llama 3
  https://docs.nvidia.com/nemo/megatron-bridge/nightly/apidocs/bridge/bridge.perf_recipes.llama.h100.llama3.html
- The Ultra-Scale Playbook, "Finding the best training configuration"
  https://huggingface.co/spaces/nanotron/ultrascale-playbook : its best layout per model
  size and node count is a heatmap image (8B and 80B, 1-64 nodes of 8 H100, sequence 4096,
  1M-token batches); we found no text or table of those cells, so none is quoted here.
  Its written guidance is: 10B-100B, TP=8 with PP or with ZeRO-3, or ZeRO-3 alone; at 512+
  GPUs pure ZeRO-3 becomes inefficient.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .plan_costs import Layout
from .plan_model import cluster, model
from .planner import Costed, evaluate, plan

CASES = [(m, g) for m in ("llama3-8b", "llama3-70b") for g in (64, 128, 256, 512)]
DEFAULT_BATCH = 512  # sequences of 8192 (4.2M tokens) where no source gives one: assumed

TITAN_H100 = (
    "https://github.com/pytorch/torchtitan/blob/main/benchmarks/llama3_h100_202412_torchtitan.md"
)
TITAN_A100 = "https://github.com/pytorch/torchtitan/blob/main/docs/performance.md"
TITAN_TOML = "https://github.com/pytorch/torchtitan/blob/main/torchtitan/models/llama3/train_configs/llama3_70b.toml"
MEGATRON = "https://docs.nvidia.com/nemo/megatron-bridge/nightly/apidocs/bridge/bridge.perf_recipes.llama.h100.llama3.html"


@dataclass(frozen=True)
class Published:
    """A layout as its source states it (`text`), and as the planner writes it (`layout`,
    with `assumed` saying what the source left out); `global_batch` in sequences."""

    model: str
    gpus: int
    text: str
    layout: Layout
    global_batch: int
    source: str
    assumed: str = ""
    measured: tuple[float, float, str] | None = None  # GiB per GPU, tokens/s per GPU, where


PUBLISHED = [
    Published("llama3-8b", 64, "FSDP 64, local batch 1, seq 8192, selective AC (64 A100 80 GB)",
              Layout(64, 1, 1, 3, "none", 1, 1, "selective"), 64, TITAN_A100,
              "measured on A100, costed here on H100"),
    Published("llama3-8b", 128, "FSDP 128, local batch 2 (global 256), selective AC",
              Layout(128, 1, 1, 3, "none", 1, 2, "selective"), 256, TITAN_H100,
              "seq 8192 (torchtitan's llama3_8b default); their H100s have 96 GB; their "
              "selective AC (per op) counted as Korthikanti's selective recomputation",
              (67.0, 5605, "Table 3, row FSDP")),
    Published("llama3-70b", 64, "FSDP 8 x TP 8, local batch 8, seq 8192, full AC (64 A100)",
              Layout(8, 8, 1, 3, "none", 1, 8, "full"), 64, TITAN_TOML,
              "a preset for A100, costed here on H100"),
    Published("llama3-70b", 64, "FSDP 64, local batch 1, seq 8192, full AC (64 A100 80 GB)",
              Layout(64, 1, 1, 3, "none", 1, 1, "full"), 64, TITAN_A100,
              "measured on A100, costed here on H100"),
    Published("llama3-70b", 64, "TP 4, PP 4, CP 2, global batch 256 (H100, BF16)",
              Layout(4, 4, 4, 1, "1f1b", 64, 1, "selective"), 256, MEGATRON,
              "no CP in the planner: its 2 ranks counted as DP; seq 8192, micro-batch 1, "
              "1F1B, ZeRO-1 and selective AC assumed"),
    Published("llama3-70b", 256, "FSDP 32 x TP 8, local batch 16 (global 512), full AC",
              Layout(32, 8, 1, 3, "none", 1, 16, "full"), 512, TITAN_H100,
              "seq 8192; Float8 and torch.compile in the source; their H100s have 96 GB",
              (71.9, 829, "Table 4, row 2D")),
]  # fmt: skip


@dataclass(frozen=True)
class Row:
    model: str
    gpus: int
    pick: str
    pick_seconds: float
    published: str
    agree: bool | None  # None: nothing published found
    why: str
    source: str


def _same_mesh(a: Layout, b: Layout) -> bool:
    return (a.dp, a.tp, a.pp, a.zero == 3) == (b.dp, b.tp, b.pp, b.zero == 3)


def _why(pick: Costed, theirs: Costed, memory_limit: float) -> str:
    if theirs.memory.total > memory_limit:
        return (
            f"the planner counts {theirs.memory.total / 1e9:.3g} GB per rank for it, over "
            f"{memory_limit / 1e9:.3g} GB (activations {theirs.memory.activations / 1e9:.3g} GB, "
            "Korthikanti's count)"
        )
    slower = theirs.time.total / pick.time.total - 1
    if slower <= 0.005:
        return (
            f"as fast as the pick by the planner's count ({theirs.time.total:.3g} s a step); "
            "ties go to less recomputation, then a lower ZeRO stage"
        )
    parts = ("compute", "tp", "pp", "bubble", "dp")
    diffs = {p: getattr(theirs.time, p) - getattr(pick.time, p) for p in parts}
    worst = max(diffs, key=diffs.get)
    label = {"compute": "recomputation", "tp": "TP collectives", "pp": "pipeline hand-offs",
             "bubble": "pipeline bubble", "dp": "exposed DP/FSDP traffic"}[worst]  # fmt: skip
    return f"{slower:.0%} slower by the planner's count, mostly {label} (+{diffs[worst]:.3g} s)"


def _row(name: str, gpus: int, pub: Published | None) -> Row:
    base = model(name)
    shaped = replace(base, global_batch=pub.global_batch if pub else DEFAULT_BATCH)
    machines = cluster(f"{gpus // 8}x8:h100")
    chosen = plan(shaped, machines).pick
    pick_name = chosen.name if chosen else "nothing fits"
    pick_seconds = chosen.time.total if chosen else float("nan")
    if pub is None:
        return Row(name, gpus, pick_name, pick_seconds, "none found", None,
                   "no published layout found for this size", "")  # fmt: skip
    theirs = evaluate(shaped, machines, pub.layout)
    agree = chosen is not None and _same_mesh(chosen.layout, pub.layout)
    why = _why(chosen, theirs, machines.memory_bytes) if chosen else "nothing fits"
    if pub.assumed:
        why = f"{why}; {pub.assumed}"
    return Row(name, gpus, pick_name, pick_seconds, f"{pub.text} = {pub.layout.name}",
               agree, why, pub.source)  # fmt: skip


def comparison() -> list[Row]:
    """One row per published layout, and one per case (model, GPUs) with none found."""
    rows = []
    for name, gpus in CASES:
        found = [p for p in PUBLISHED if (p.model, p.gpus) == (name, gpus)]
        rows.extend(_row(name, gpus, p) for p in found or [None])
    return rows


def table(rows: list[Row] | None = None) -> str:
    """The comparison as a Markdown table."""
    rows = comparison() if rows is None else rows
    lines = [
        "| model | GPUs | planner's pick (s/step) | published | agree | why |",
        "|---|---:|---|---|---|---|",
    ]
    for r in rows:
        agree = {None: "-", True: "yes", False: "no"}[r.agree]
        source = f" [source]({r.source})" if r.source else ""
        lines.append(
            f"| {r.model} | {r.gpus} | {r.pick} ({r.pick_seconds:.3g}) | {r.published}{source} "
            f"| {agree} | {r.why} |"
        )
    return "\n".join(lines)


def scored() -> list[dict]:
    """The planner against what a source measured for a layout it ran: the memory per GPU and
    tokens per second per GPU, predicted for that layout on the planner's H100 against the
    source's reading (each source's cluster and software differ: its notes say how)."""
    rows = []
    for pub in (p for p in PUBLISHED if p.measured):
        gib, tokens, where = pub.measured
        shaped = replace(model(pub.model), global_batch=pub.global_batch)
        costed = evaluate(shaped, cluster(f"{pub.gpus // 8}x8:h100"), pub.layout)
        predicted = shaped.global_batch * shaped.seq / (pub.gpus * costed.time.total)
        rows.append({
            "layout": f"{pub.model} {pub.layout.name}", "where": where, "source": pub.source,
            "measured_gb": gib * 2**30 / 1e9, "predicted_gb": costed.memory.total / 1e9,
            "measured_tokens": tokens, "predicted_tokens": predicted, "notes": pub.assumed,
        })  # fmt: skip
    return rows


def scored_table(rows: list[dict] | None = None) -> str:
    """`scored` as a Markdown table, each prediction as a share of the measured figure."""
    rows = scored() if rows is None else rows
    lines = [
        "| layout | memory per GPU: measured, planner | tokens/s per GPU: measured, planner "
        "| measured in |",
        "|---|---|---|---|",
    ]
    for r in rows:
        memory = r["predicted_gb"] / r["measured_gb"] - 1
        speed = r["predicted_tokens"] / r["measured_tokens"] - 1
        lines.append(
            f"| {r['layout']} | {r['measured_gb']:.1f} GB, {r['predicted_gb']:.1f} GB "
            f"({memory:+.0%}) | {r['measured_tokens']:,.0f}, {r['predicted_tokens']:,.0f} "
            f"({speed:+.0%}) | [{r['where']}]({r['source']}); {r['notes']} |"
        )
    return "\n".join(lines)
