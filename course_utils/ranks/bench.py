"""How long it takes to start N ranks and get a value back, and how often that fails.

Target: a median under 0.5 s for 4 gloo ranks, and not one failed launch in 1,000 (a
1-in-50 failure is a random red cell for some learner in every session). With
`--learners K`, K separate processes (K learners on one JupyterHub host) each make
`--repeats` launches at the same time; every one of them must succeed.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

from .start_method import default_start_method

NAME = "launch"
HELP = "start N ranks of a no-op and get their results back, repeated; count failures"
TARGET_SECONDS = 0.5


def add_arguments(parser) -> None:
    parser.add_argument("--world-size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backend", default="auto")
    parser.add_argument(
        "--start-method",
        choices=["fork", "forkserver", "spawn"],
        default=None,
        help="default: the course's choice for this platform (doctor prints it)",
    )
    parser.add_argument(
        "--learners", type=int, default=1, help="separate processes launching at once"
    )


def _rank_and_one() -> int:
    import torch.distributed as dist

    return dist.get_rank() + 1


def launches(world_size: int, repeats: int, backend: str, start_method: str | None) -> dict:
    """Make `repeats` launches here; their times and failures (the first few messages kept)."""
    from . import supervisor
    from .launch import launch

    seconds, errors = [], []
    restarts = supervisor.setup_restarts
    for _ in range(repeats):
        start = time.perf_counter()
        try:
            values = launch(_rank_and_one, world_size, backend=backend, start_method=start_method)
            if values != list(range(1, world_size + 1)):
                raise RuntimeError(f"launch returned {values}, expected 1..{world_size}")
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
            continue
        seconds.append(time.perf_counter() - start)
    restarts = supervisor.setup_restarts - restarts
    return {"seconds": seconds, "failed": len(errors), "errors": errors[:5], "restarts": restarts}


def _learners(args) -> dict:
    """Run `args.learners` processes that each make their launches, all at once; merge them."""
    code = (
        "import json, sys; from course_utils.ranks.bench import launches; "
        "print(json.dumps(launches(*json.loads(sys.argv[1]))))"
    )
    spec = json.dumps([args.world_size, args.repeats, args.backend, args.start_method])
    procs = [
        subprocess.Popen([sys.executable, "-c", code, spec], stdout=subprocess.PIPE, text=True)
        for _ in range(args.learners)
    ]
    merged = {"seconds": [], "failed": 0, "errors": [], "restarts": 0}
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            merged["failed"] += args.repeats
            merged["errors"].append(f"a learner's process exited with code {proc.returncode}")
            continue
        part = json.loads(out.strip().splitlines()[-1])
        merged["seconds"] += part["seconds"]
        merged["failed"] += part["failed"]
        merged["errors"] += part["errors"]
        merged["restarts"] += part["restarts"]
    return merged


def run(args) -> dict:
    if args.learners > 1:
        measured = _learners(args)
    else:
        measured = launches(args.world_size, args.repeats, args.backend, args.start_method)
    alone = args.learners == 1
    seconds = measured["seconds"] or [float("nan")]
    median = statistics.median(seconds)
    return {
        "benchmark": NAME,
        "world_size": args.world_size,
        "backend": args.backend,
        "start_method": args.start_method or f"default ({default_start_method()})",
        "learners": args.learners,
        "launches": args.repeats * args.learners,
        "failed": measured["failed"],
        "errors": measured["errors"][:5],
        "restarted_setups": measured["restarts"],
        "seconds_median": round(median, 4),
        "seconds_min": round(min(seconds), 4),
        "seconds_max": round(max(seconds), 4),
        "target_seconds": TARGET_SECONDS if alone else None,
        "target": f"median under {TARGET_SECONDS} s and 0 failed launches"
        if alone
        else "0 failed launches (the learners share these cores, so start-up is slower)",
        "meets_target": measured["failed"] == 0 and (median < TARGET_SECONDS or not alone),
    }
