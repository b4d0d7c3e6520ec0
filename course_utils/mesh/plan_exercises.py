"""Checker for notebook 11's memory exercise: a layout's model-state bytes per rank.

The learner writes `memory_per_rank(params, dp, tp, pp, zero_stage, precision)`: the
bytes of weights, gradients and Adam state one rank holds (no activations) when
`params` parameters are split TP x PP ways and the DP dimension runs at a ZeRO stage
(0 = DDP, 3 = FSDP), in 'fp32' or 'bf16' (bf16 weights and gradients, fp32 master copy
and moments). The checker compares it with the planner's accounting
(`plan_costs.memory`, chapter 08's formula) at several layouts and names the classic
mistakes: forgetting that TP and PP divide the model, sharding the optimizer state
without ZeRO, and counting bf16 weights without their fp32 master copy.
"""

from __future__ import annotations

import math

from ..core.own_answers import answer, first_problem_verdict
from ..memory.formulas import model_state_bytes
from .plan_model import precision_key

# (params, dp, tp, pp, zero_stage, precision): DDP first, so the ZeRO mistake shows
CASES = [
    (8e9, 8, 1, 1, 0, "bf16"),
    (8e9, 4, 2, 1, 0, "fp32"),
    (70e9, 8, 4, 2, 1, "bf16"),
    (70e9, 16, 4, 1, 3, "bf16"),
    (1e9, 2, 2, 2, 2, "fp32"),
]


def expected(params, dp, tp, pp, zero_stage, precision) -> float:
    """The planner's model states: (p + g + k) bytes per parameter of the TP x PP shard,
    the parts ZeRO shards divided by DP (`memory.formulas.model_state_bytes`)."""
    return model_state_bytes(params / (tp * pp), dp, zero_stage, precision_key(precision))


def answer_values() -> dict[str, list]:
    """The checker's layouts and answers (`course.revealed`: none may appear above it)."""
    return {"memory_per_rank": [(case, expected(*case)) for case in CASES]}


def answer_phrases() -> dict[str, list]:
    """What would give an answer away as text (`course.revealed`): the shard a rank holds."""
    return {"memory_per_rank": ["1/(TP·PP)", "1/(TP x PP)", "params/(TP·PP)", "ZeRO's 1/DP"]}


def _mistakes(params, dp, tp, pp, zero_stage, precision) -> dict[str, float]:
    key = precision_key(precision)
    parts = model_state_bytes(params / (tp * pp), dp, zero_stage, key, parts=True)
    found = {
        "you did not divide by TP x PP: tensor parallelism splits every layer over TP ranks "
        "and pipeline parallelism gives each of PP ranks only its stage's layers, so one "
        "rank holds params / (TP x PP) of them": model_state_bytes(params, dp, zero_stage, key),
    }
    if zero_stage == 0 and dp > 1:
        found[
            "you sharded the optimizer state over DP without ZeRO: plain data parallelism "
            "(ZeRO stage 0) keeps a full copy of Adam's state on every rank"
        ] = parts["params"] + parts["grads"] + parts["optimizer"] / dp
    if key == "mixed":
        found[
            "you counted bf16 weights but no fp32 master copy: mixed precision keeps 4 bytes "
            "of fp32 weights per parameter beside the two Adam moments (12 bytes of optimizer "
            "state, 16 in all)"
        ] = parts["params"] + parts["grads"] + parts["optimizer"] * 8 / 12
    return found


def _problem(fn, case):
    got = answer(fn, *case)
    if not isinstance(got, int | float) or isinstance(got, bool):
        return f"memory_per_rank must return a number of bytes, not a {type(got).__name__}"
    want = expected(*case)
    if math.isclose(got, want, rel_tol=1e-6):
        return None
    for mistake, value in _mistakes(*case).items():
        if math.isclose(got, value, rel_tol=1e-6):
            return mistake
    params, dp, tp, pp, zero, precision = case
    return (
        f"for {params:.3g} parameters, DP {dp} x TP {tp} x PP {pp}, ZeRO-{zero}, {precision}: "
        f"{got:.4g} bytes, but the planner counts {want:.4g}"
    )


def check_memory_per_rank(fn):
    """✓ when `fn` agrees with the planner's model states at every layout in `CASES`."""
    return first_problem_verdict(
        fn,
        "memory_per_rank",
        lambda *case: _problem(fn, case),
        CASES,
        "your memory per rank equals the planner's at every layout: TP x PP divide the "
        "model, ZeRO divides what its stage shards, and mixed precision keeps its fp32 copy",
    )
