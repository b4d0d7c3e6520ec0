"""Notebook 10's claims about tensor and sequence parallel, as verdicts.

Each compares what the runs measured (`tp_runs`) with a stated threshold or a formula
(`tp_formulas`); the numbers go on the line before, the verdict line carries none.
"""

from __future__ import annotations

from ..core.checks import Verdict, verdict
from .tp_runs import MemoryRun


def tp_equals_one_process(diffs: dict, tolerance: float = 1e-5) -> Verdict:
    """`diffs`: the largest |parameter difference| from one process, per run (any key)."""
    return verdict(
        bool(diffs) and all(d <= tolerance for d in diffs.values()),
        f"after the same SGD steps every split model's parameters equal one process's "
        f"(fp32, within {tolerance:g})",
    )


def tp_bytes_match_formula(runs: list[tuple[dict, dict]], what: str = "tensor parallel") -> Verdict:
    """`runs`: (measured, formula) per run. `measured`: {block: {direction: {op: bytes}}} from
    one step's log (`bytes_per_block`); `formula`: {direction: {op: bytes}}
    (`tp_formulas.block_bytes`). Exact, byte for byte, in every block of every run."""
    return verdict(
        bool(runs) and all(m and all(t == formula for t in m.values()) for m, formula in runs),
        f"{what}: every block sends exactly the formula's bytes, op by op, forward and backward",
    )


def sp_moves_the_same_bytes_as_tp(tp: dict[int, int], sp: dict[int, int]) -> Verdict:
    """`tp`, `sp`: bytes one rank sends per block (both directions), per N."""
    return verdict(
        bool(tp) and tp.keys() == sp.keys() and all(tp[n] == sp[n] for n in tp),
        "sequence parallel puts exactly tensor parallel's bytes per block on the wire, "
        "as reduce-scatters and all-gathers",
    )


def _by_n(runs: list[MemoryRun], kind: str) -> dict[int, int]:
    return {r.world_size: r.saved for r in runs if r.kind == kind}


def sp_cuts_activation_memory(runs: list[MemoryRun], min_cut: float = 0.05) -> Verdict:
    """At every N, SP's activation bytes per rank at least `min_cut` below TP's."""
    tp, sp = _by_n(runs, "tp"), _by_n(runs, "sp")
    ok = bool(tp) and tp.keys() == sp.keys()
    ok = ok and all(n > 1 and sp[n] <= (1 - min_cut) * tp[n] for n in tp)
    return verdict(
        ok,
        f"at every N, sequence parallel keeps at least {min_cut:.0%} fewer activation bytes "
        "per rank than tensor parallel",
    )


def sp_saving_is_the_layernorms(
    runs: list[MemoryRun], predicted: dict[int, int], tolerance: float = 0.01
) -> Verdict:
    """`predicted`: per N, the LayerNorms' saved bytes SP no longer keeps
    (`tp_formulas.layernorm_bytes_saved`); the measured saving must be it within `tolerance`."""
    tp, sp = _by_n(runs, "tp"), _by_n(runs, "sp")
    ok = bool(predicted) and all(
        n in tp and n in sp and abs((tp[n] - sp[n]) / p - 1) <= tolerance
        for n, p in predicted.items()
    )
    return verdict(
        ok,
        f"what sequence parallel saves is the LayerNorms' inputs and statistics, (N-1)/N of "
        f"them, within {tolerance:.0%}",
    )
