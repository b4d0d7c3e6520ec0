"""Which backend each chapter's ranks run on with the `gpu` profile, and why.

Chapters 00-04 launch with the profile's backend (NCCL, one GPU per rank, with the `gpu`
profile). Later chapters run gloo ranks on the CPU in every profile where the lesson
needs it: more ranks than a machine has GPUs, CPU tensors whose bytes the profiler counts,
or failure modes that NCCL handles differently. Each of those notebooks prints its reason
in one line (`runs_on`), and the README's course map shows the same table, so nothing
prints "nccl" while its ranks run gloo.
"""

from __future__ import annotations

GLOO = "gloo"

GLOO_ON_PURPOSE = {
    "05": "the algorithms are timed on 2 to 8 ranks over simulated links, more ranks than a "
    "GPU box has GPUs; `bench allreduce --link real` times them on the real link",
    "06": "stages are timed on CPU cores; the hand-off between them is the lesson, not the GPU",
    "07": "the parameter server and its workers, one of them failing, are CPU processes",
    "08": "the bytes each ZeRO stage holds are counted by the CPU allocator's profiler",
    "09": "the kills, hangs and timeouts it shows are reported as gloo reports them",
    "11": "its mesh has 8 ranks, more than a GPU box has GPUs; on a cluster `mesh_worker` "
    "runs the same mesh under torchrun, one GPU per rank",
}


def chapter_backend(profile_backend: str, chapter: str) -> str:
    """The backend chapter `chapter` ("05") launches its ranks with under a profile whose
    backend is `profile_backend`."""
    return GLOO if chapter in GLOO_ON_PURPOSE else profile_backend


def runs_on(profile_backend: str, chapter: str) -> str:
    """The line a notebook prints about its ranks' backend."""
    backend = chapter_backend(profile_backend, chapter)
    if chapter in GLOO_ON_PURPOSE and profile_backend != GLOO:
        return f"ranks: gloo on the CPU in every profile, because {GLOO_ON_PURPOSE[chapter]}"
    if chapter in GLOO_ON_PURPOSE:
        return f"ranks: gloo on the CPU, in the gpu profile too: {GLOO_ON_PURPOSE[chapter]}"
    return f"ranks: {backend}" + (" (one GPU per rank)" if backend == "nccl" else " on the CPU")


def map_column(chapter: str) -> str:
    """The course map's cell for a chapter: what its ranks run on with the gpu profile."""
    return "gloo (CPU)" if chapter in GLOO_ON_PURPOSE else "NCCL"
