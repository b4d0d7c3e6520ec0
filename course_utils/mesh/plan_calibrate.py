"""The two constants the planner needs about this machine, measured in one process.

The planner (`plan_costs`) turns a model and a cluster into seconds and bytes with two
numbers it cannot know: how fast a device computes and how many bytes a block keeps for
its backward. For an H100 they are an assumed FLOP rate and Korthikanti et al.'s formula;
for the course's CPU ranks both are measured here, once, on one rank of one thread (as
every mesh rank computes), and never tuned afterwards:

- an *effective* FLOP rate: the FLOPs the planner counts (6 per parameter and token, and
  attention's) over the CPU seconds of one
  forward+backward of the whole model on the whole batch. A matmul's rate
  (`plan_model.measured_flops`) would leave out what the step spends outside the
  matmuls (LayerNorm, GELU, attention's softmax, the embedding, autograd's bookkeeping),
  which at these widths is a large share. It is the rate of one process's step, so a
  layout whose ranks compute on smaller slices (TP, small micro-batches) runs slower
  than it says: the planner's model has one rate per device, and so does this.
- the bytes one block keeps between its forward and its backward, per token and unit of
  width, on one TP rank of t = 1 and of t = 2 (the shard `mesh3d` builds, its g running
  on a world of one): `kept(t) = whole + split / t` gives what every TP rank keeps whole
  (the LayerNorms' inputs and outputs: no sequence parallelism here) and what TP splits.
  Korthikanti's 34 + 5as/h (16-bit) is written for a GPT block with dropout and an
  attention matrix; the course's block has no dropout, and PyTorch's CPU attention keeps
  no s x s matrix, so it would describe another block.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch
import torch.distributed as dist

from ..core.sizes_model_parallel import TransformerSizes
from ..memory.peak import allocated_during
from ..network.fabric import Link
from ..ranks.launch import launch
from ..transformer.model import batches, build, loss_of
from .mesh3d import stage_model
from .plan_model import Cluster, Model, cluster, course_model

SPLITS = (1, 2)  # the TP degrees `kept(t) = whole + split / t` is fitted on


@dataclass(frozen=True)
class Calibration:
    """What one rank measured: CPU seconds of a forward+backward of the whole batch, its
    tokens, and per TP degree the bytes a block keeps per token and unit of width."""

    step_seconds: float
    tokens: int
    flops_per_token: float  # forward and backward, as the planner counts them
    kept: dict[int, float]

    @property
    def flops(self) -> float:
        """The effective rate: the step's FLOPs as the planner counts them (6 per parameter
        and attention's, per token) per second of forward+backward."""
        return self.flops_per_token * self.tokens / self.step_seconds

    @property
    def activations(self) -> tuple[float, float]:
        """(whole, split): bytes per token and unit of width, fitted on t = 1 and t = 2."""
        split = 2 * (self.kept[1] - self.kept[2])
        return self.kept[1] - split, split


def _measure(sizes: TransformerSizes, repeats: int) -> dict:
    """Inside a one-rank world: the step's CPU seconds and each TP shard's kept bytes."""
    torch.set_num_threads(1)
    model, data = build(sizes), batches(sizes, 1)[0]
    loss_of(model, data).backward()  # lazy set-up inside autograd, before the clock
    start = time.thread_time()
    for _ in range(repeats):
        loss_of(model, data).backward()
    seconds = (time.thread_time() - start) / repeats
    x = torch.randn(sizes.batch, sizes.seq_len, sizes.width)  # cpu: like every rank here
    kept = {}
    for t in SPLITS:
        block = stage_model(model, 0, 1, 0, t, dist.group.WORLD).blocks[0]
        _, _, held = allocated_during(lambda block=block: block(x.requires_grad_()))
        kept[t] = held / x.numel()
    return {"seconds": seconds, "kept": kept}


def calibrate(sizes: TransformerSizes, repeats: int = 3) -> Calibration:
    """Measure both constants for `sizes` on one launched rank (its own process, one thread)."""
    found = launch(_measure, 1, backend="gloo", args=(sizes, repeats))[0]
    per_token = 3 * course_model(sizes).forward_flops_per_token()
    return Calibration(found["seconds"], sizes.batch * sizes.seq_len, per_token, found["kept"])


def planner_model(sizes: TransformerSizes, calibration: Calibration) -> Model:
    """The course's transformer as the planner counts it, with its measured activations."""
    return replace(course_model(sizes), activations=calibration.activations)


def planner_cluster(calibration: Calibration, link: Link, ranks: int = 8) -> Cluster:
    """`ranks` CPU ranks as one node (`plan_model.cluster`'s 'cpu' kind): the calibrated
    rate, every group on `link` (the one the simulated run crosses), and this machine's
    memory shared out (never the limit: the check compares layouts that all fit)."""
    cpus = cluster(f"1x{ranks}:cpu", tflops=calibration.flops / 1e12, intra=link, inter=link)
    return replace(cpus, name=f"{cpus.name} ({link.spec})")
