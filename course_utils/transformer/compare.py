"""Which parallelism when: what each one puts on the wire, measured, and what that costs.

Every row comes from the messages a run really sent (`comm`'s logs), beside its formula:
- TP and SP send the (batch, seq, width) activations in every block, forward and
  backward, on the critical path: a layer waits for them;
- CP sends each block's keys and values round the ring: batch x seq x width again, but
  while attention computes;
- EP sends the routed tokens to their experts and back: tokens x top-k x width per MoE layer;
- DP and FSDP send the gradients (and FSDP the parameters) once per step: what they send
  grows with the parameters, not with the batch or the sequence, and overlaps the backward.

The time of each on a fabric is a prediction from those messages (α + n/β per message of
a ring's step), printed without a ✓: the chapter does not time these runs on a network.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.checks import Verdict, verdict
from ..network.fabric import Link, parse
from . import comm
from .data_parallel import batch_split_bytes
from .tp_formulas import sent_per_block
from .tp_runs import bytes_per_block

FABRICS = ("nvlink4", "ib-ndr", "10gbe")  # inside a node, across nodes, a lab's Ethernet
ACTIVATIONS = "batch x sequence x width, in every block"
KEYS_AND_VALUES = "batch x sequence x width (keys, values), in every block"
TOKENS = "tokens x top-k x width, in every MoE layer"


@dataclass(frozen=True)
class Row:
    parallelism: str
    unit: str  # "block", "MoE layer" or "step": what `measured` is per
    measured: int  # bytes rank 0 sent per unit, from its log
    formula: int
    messages: list[comm.Message]  # rank 0's, per unit
    grows_with: str

    def seconds(self, link: Link | str) -> float:
        return predicted_seconds(self.messages, link)

    def per_step(self, blocks: int) -> int:
        """Bytes per step: a block's (or MoE layer's, were every MLP one) times `blocks`."""
        return self.measured * (1 if self.unit == "step" else blocks)

    def seconds_per_step(self, link: Link | str, blocks: int) -> float:
        return self.seconds(link) * (1 if self.unit == "step" else blocks)


def _wire_steps(m: comm.Message) -> list[float]:
    """The bytes of each message one rank sends, one after another, for `m` run as a ring
    (or, for an all-to-all, one message per peer; a send is one message)."""
    n = m.ranks
    if m.op == "send":
        return [m.sent]
    steps = 2 * (n - 1) if m.op == "all_reduce" else n - 1
    return [m.sent / steps] * steps if steps else []


def predicted_seconds(messages: list[comm.Message], link: Link | str) -> float:
    """Wire time of `messages` one after another on `link`: α + n/β per message sent."""
    link = parse(link)
    return sum(link.alpha + b * link.beta for m in messages for b in _wire_steps(m))


def comparison(sizes, world: int, tp: dict, ring, moe, batch_split: dict) -> list[Row]:
    """One row per parallelism at `world` ranks, from the chapter's runs: `tp` keyed by
    (kind, N) (`tp_runs.train_and_compare`), `ring` a zigzag `RingRun`, `moe` a balanced
    `MoERun` (its formula takes the token counts from one process's routing) and
    `batch_split` keyed by (kind, N) (`data_parallel.train_batch_split`)."""
    rows = []
    for kind, name in (("tp", "TP"), ("sp", "SP")):
        log = tp[kind, world].step_log
        measured = sum(sum(ops.values()) for ops in bytes_per_block(log)[0].values())
        formula = sent_per_block(sizes, world, kind)
        block_0 = [m for m in log if m.where.startswith("block 0 ")]
        rows.append(Row(name, "block", measured, formula, block_0, ACTIVATIONS))
    sent, formula = sum(ring.sent[0].values()), sum(ring.formula.values())
    rows.append(Row("CP", "block", sent, formula, list(ring.log), KEYS_AND_VALUES))
    sent = sum(moe.sent[0].values())
    formula = moe.formula[0]["forward"] + moe.formula[0]["backward"]
    rows.append(Row("EP", "MoE layer", sent, formula, list(moe.log), TOKENS))
    for kind, name in (("dp", "DP"), ("fsdp", "FSDP")):
        run = batch_split[kind, world]
        formula = batch_split_bytes(run.parameters, world, kind, run.tensors)
        rows.append(Row(name, "step", comm.bytes_sent(run.step_log), formula,
                        list(run.step_log), "parameters, once per step"))  # fmt: skip
    return rows


def every_row_matches_its_formula(rows: list[Row]) -> Verdict:
    """Exact: each count of bytes is a sum of tensor sizes, so any difference is a message
    too many, too few or of the wrong size."""
    wrong = [r.parallelism for r in rows if r.measured != r.formula]
    claim = "every parallelism sent exactly the bytes its formula says"
    return verdict(not wrong, claim if not wrong else f"{claim}: not {', '.join(wrong)}")
