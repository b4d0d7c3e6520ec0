"""One mesh layout run for the planner's check: its step time on the simulated clock and
its peak bytes per rank.

Every rank trains `mesh3d`'s transformer (`mesh_runs.join_mesh`, Adam, as the planner's
memory formulas assume) and measures two things:
- the *simulated* seconds of a step: after a warm-up step (autograd's lazy set-up, Adam's
  state), `steps` steps inside `wire.active(link, virtual=True)`, where each rank's clock
  advances by its own CPU time and by the wire charges of every hand-off and all-reduce it
  makes, so that 8 ranks on 2 cores time as 8 machines on that link would. A rank's time
  is its clock at the end less the moment all the clocks started; the layout's time is
  the slowest rank's, per step.
- the peak bytes: what it holds before a step plus the most the step adds at once
  (`memory.peak.peak_bytes_during`), on a step over the real link, so that the
  simulator's own packing of messages is not counted as the model's memory. The
  gradients are dropped first (the step's own `zero_grad` would drop them): the profiler
  sees only frees of what it saw allocated, so gradients held before it started would be
  counted twice. Held before: parameters and Adam's moments; the step makes the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.distributed as dist

from ..core.sizes_model_parallel import MeshSizes
from ..memory.peak import peak_bytes_during
from ..network import wire
from ..ranks.launch import launch
from ..transformer.model import batches
from .mesh_runs import join_mesh, mesh_step
from .plan_costs import Layout


@dataclass(frozen=True)
class MeshLayout:
    """DP x TP x PP ranks and GPipe's micro-batches per replica."""

    dp: int
    tp: int
    pp: int
    microbatches: int = 1

    @property
    def name(self) -> str:
        parts = [f"{d}{n}" for d, n in (("dp", self.dp), ("tp", self.tp), ("pp", self.pp)) if n > 1]
        pipeline = f"-m{self.microbatches}" if self.pp > 1 or self.microbatches > 1 else ""
        return "-".join(parts or ["one-rank"]) + pipeline

    @property
    def ranks(self) -> int:
        return self.dp * self.tp * self.pp

    def sizes(self, cfg: MeshSizes) -> MeshSizes:
        """`cfg` on this layout: its shape in `cfg.dims`' order, its micro-batches, Adam."""
        size = {"dp": self.dp, "tp": self.tp, "pp": self.pp}
        shape = tuple(size[d] for d in cfg.dims)
        return replace(
            cfg, shape=shape, microbatches=self.microbatches, optimizer="adam",
            persistent_grads=True,
        )  # fmt: skip

    def planned(self, global_batch: int) -> Layout:
        """The planner's Layout of the same run: DDP reducing after the whole backward
        (`sync_dp`), GPipe, no recomputation."""
        return Layout(
            self.dp, self.tp, self.pp, zero=0,
            schedule="gpipe" if self.pp > 1 else "none", microbatches=self.microbatches,
            micro_batch=global_batch // (self.dp * self.microbatches), dp_overlap=False,
        )  # fmt: skip


def _state_bytes(rank) -> int:
    """Bytes of the parameters, their gradients and the optimizer's state on this rank."""
    params = list(rank.model.parameters())
    tensors = params + [p.grad for p in params if p.grad is not None]
    tensors += [v for s in rank.opt.state.values() for v in s.values() if torch.is_tensor(v)]
    return sum(t.numel() * t.element_size() for t in tensors)


def measure_rank(cfg: MeshSizes, link: str, steps: int) -> dict:
    """Inside a rank: this rank's simulated seconds per step and its peak bytes."""
    rank = join_mesh(cfg)
    data = batches(cfg.model, steps + 2)
    mesh_step(rank, data[0])
    with wire.active(link, virtual=True):
        dist.barrier()
        start = wire.restart()
        for sequence in data[1 : steps + 1]:
            mesh_step(rank, sequence)
        seconds = (wire.now() - start) / steps
    dist.barrier()
    held = _state_bytes(rank)  # the gradients among them: zeroed in place, never freed
    _, peak = peak_bytes_during(lambda: mesh_step(rank, data[-1]))
    return {"rank": dist.get_rank(), "seconds": seconds, "peak_bytes": held + peak}


def measure(layout: MeshLayout, cfg: MeshSizes, link: str, steps: int = 3) -> tuple[float, int]:
    """Run `layout` on `layout.ranks` gloo ranks: the slowest rank's simulated seconds per
    step and the fullest rank's peak bytes."""
    sizes = layout.sizes(cfg)
    reports = launch(
        measure_rank,
        sizes.world_size,
        backend="gloo",
        timeout=cfg.timeout,
        args=(sizes, link, steps),
    )
    return max(r["seconds"] for r in reports), max(r["peak_bytes"] for r in reports)
