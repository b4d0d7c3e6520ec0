"""`python -m course_utils doctor`: what the course will run with, and what would break it.

It never starts CUDA in its own process (GPUs are counted through NVML), so what it says
about forking holds for the notebook kernel too: it forks a child (through
`ranks.launch.run_in_child`, like every child the course starts) and asks whether that
child could still use CUDA. Every problem comes with what to do; the exit code is 1 if
there is any.
"""

from __future__ import annotations

import platform
import sys


def report() -> tuple[dict, list[str]]:
    """Everything doctor checks, as plain data, and the problems found (each an instruction)."""
    facts: dict = {"python": f"{platform.python_version()} ({sys.executable})"}
    problems: list[str] = []
    try:
        import torch
        import torch.distributed as dist
    except Exception as exc:
        facts["torch"] = f"BROKEN: {exc}"
        return facts, ["torch does not import: run `make test` or `pip install -e .[dev]`."]
    facts["torch"] = torch.__version__
    try:
        import torchvision

        facts["torchvision"] = torchvision.__version__
    except Exception as exc:
        facts["torchvision"] = f"BROKEN: {exc}"
        problems.append(
            "torchvision does not import. 'operator torchvision::nms does not exist' means a "
            "torch build that does not match torchvision: reinstall both with "
            "`pip install --force-reinstall torch torchvision`."
        )
    available = {"gloo": dist.is_gloo_available(), "nccl": dist.is_nccl_available()}
    facts["backends"] = [name for name, ok in available.items() if ok]
    if not available["gloo"]:
        problems.append("this torch has no gloo backend, which every CPU rank needs.")
    from ..core import data, gpus, profiles
    from ..core.errors import ProfileError
    from ..ranks.bootstrap import threads_per_rank, usable_cores
    from ..ranks.start_method import default_start_method, start_method_and_why

    seen = gpus.visible_gpus()
    facts["gpus"] = {"count": seen.count, "counted_by": seen.how}
    facts["start_method"] = {b: default_start_method(b) for b in ("gloo", "nccl")}
    facts["start_method_why"] = start_method_and_why("gloo")[1]
    facts["forked_child_in_bad_fork"] = forked_child_in_bad_fork()
    if facts["forked_child_in_bad_fork"]:
        problems.append(
            "CUDA was started in this process before forking, so forked ranks cannot use it; "
            "restart the kernel and let launch() start the ranks before any CUDA call."
        )
    try:
        profile = profiles.current()
        facts["profile"] = {
            "name": profile.name,
            "description": profile.description,
            "world_size": profile.world_size,
            "backend": profile.backend,
            "threads_per_rank": threads_per_rank(profile.world_size),
            "cores": usable_cores(),
        }
    except ProfileError as exc:
        facts["profile"] = f"BROKEN: {exc}"
        problems.append(str(exc))
    facts["data"] = data.status()
    facts["launch"], launch_problems = check_launch()
    problems += launch_problems
    if seen.count and available["nccl"]:
        facts["nccl_launch"], nccl_problems = check_nccl_launch()
        problems += nccl_problems
    return facts, problems


def forked_child_in_bad_fork() -> bool:
    """Whether a child forked from this process now could no longer start CUDA.

    A probe that fails or hangs (30 s) counts as yes: forking is then not to be trusted.
    """
    from ..core.errors import ChildError
    from ..ranks.launch import run_in_child
    from ..ranks.start_method import can_fork

    if not can_fork():
        return False
    try:
        return run_in_child(_in_bad_fork, start_method="fork", timeout=30)
    except ChildError:
        return True


def _in_bad_fork() -> bool:
    import torch

    return bool(torch.cuda._is_in_bad_fork())


def check_launch() -> tuple[str, list[str]]:
    """Start two real gloo ranks and all_reduce: the one thing every notebook needs."""
    from ..ranks.examples import sum_of_ranks
    from ..ranks.launch import launch

    try:
        results = launch(sum_of_ranks, 2, backend="gloo", timeout=60)
    except Exception as exc:
        return f"BROKEN: {type(exc).__name__}: {exc}", [
            f"two gloo ranks could not all_reduce ({exc})."
        ]
    ok = results == [1, 1]
    line = f"2 gloo ranks, all_reduce -> {results} {'ok' if ok else 'WRONG'}"
    return line, [] if ok else [f"all_reduce of ranks 0+1 gave {results}, expected [1, 1]."]


def check_nccl_launch() -> tuple[str, list[str]]:
    """One spawned NCCL rank on its own GPU: a CUDA all_reduce, as the gpu profile's runs do."""
    from ..ranks.examples import cuda_all_reduce
    from ..ranks.launch import launch

    try:
        (result,) = launch(cuda_all_reduce, 1, backend="nccl", timeout=300)
    except Exception as exc:
        return f"BROKEN: {type(exc).__name__}: {exc}", [f"one NCCL rank failed: {exc}"]
    ok = result["value"] == 1.0 and result["device"].startswith("cuda")
    line = f"1 nccl rank on {result['device']}, all_reduce -> {result['value']}"
    return line, [] if ok else [f"the NCCL all_reduce gave {result}, expected 1.0 on cuda."]


def print_report(facts: dict) -> None:
    for key, value in facts.items():
        if key == "data":
            for name, state in value.items():
                print(f"{'data.' + name:<25} {state}")
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(value) or "none"
        print(f"{key:<25} {value}")
