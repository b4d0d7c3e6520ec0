"""The sizes of notebook 11's 3D mesh (DP x PP x TP on one small transformer).

Apart from `sizes.py` so that each stays short; the defaults are the `cpu` profile's: eight
gloo ranks share two cores, so the model is tiny and the steps few.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .sizes_transformer import TransformerSizes


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
        n = 1
        for s in self.shape:
            n *= s
        return n
