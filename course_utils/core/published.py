"""Figures the course quotes from publications, each with its source and where it was read.

A notebook or bench that sets its measurement beside a published number reads the number
here, so that the figure, who published it and the table or line it comes from are written
once. (The layouts published for Llama-3, with their sources, are the planner's own data:
`mesh.published`.)
"""

from __future__ import annotations

from dataclasses import dataclass

REPORT = (
    "the practitioner's report the course reproduces (CIFAR-10, a simple CNN, 4 GPUs, "
    "PyTorch; its optimizer config is notebooks/optim.config)"
)
MEGATRON_DISTRIBUTED_OPTIMIZER = (
    "https://docs.nvidia.com/megatron-core/developer-guide/latest/distrib_optimizer.html"
)


@dataclass(frozen=True)
class Figure:
    """A published number: what it measures, who published it, and where in the source."""

    value: float
    what: str
    source: str
    where: str


NAIVE_DDP_SECONDS = Figure(
    443, "seconds of its naive DDP run", REPORT, "its DDP run against one process"
)
ONE_PROCESS_SECONDS = Figure(
    73,
    "seconds of one process at the naive DDP run's effective batch",
    REPORT,
    "its DDP run against one process",
)
SMALLEST_BATCH_SLOWDOWN = Figure(
    8,
    "times as long per epoch for batch 8 as for batch 512, 4 trials at a time",
    REPORT,
    "its batch-size sweep at lr 0.001, 10 epochs",
)
MEGATRON_BYTES_PER_PARAMETER = {  # model states per parameter, not distributed (d = 1)
    (weights, grads): Figure(
        value,
        f"bytes per parameter with {weights} weights and {grads} gradients",
        MEGATRON_DISTRIBUTED_OPTIMIZER,
        "the table of theoretical bytes per parameter, column 'Non-distributed optim'",
    )
    for weights, grads, value in (
        ("float16", "float16", 20),
        ("float16", "fp32", 18),
        ("fp32", "fp32", 16),
    )
}


def naive_ddp_over_one_process() -> float:
    """The report's naive DDP run over its one process at the same effective batch."""
    return NAIVE_DDP_SECONDS.value / ONE_PROCESS_SECONDS.value
