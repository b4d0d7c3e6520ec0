"""The entry point torchrun runs on every node: `python -m course_utils.ranks.torchrun MOD:FN`.

It does what `launch` does inside each rank (tie to the parent, share the cores, pick the
device, join the group) but takes rank and world size from torchrun's environment, so the
same function runs on one laptop and on several machines. Rank 0 prints every rank's
return value on one line, `course_utils.ranks.torchrun results: [...]`, in rank order.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys

import torch.distributed as dist

from . import bootstrap as rank_setup
from .local_nodes import RESULTS_PREFIX


def load_target(target: str):
    """'package.module:function' or 'path/to/file.py:function' -> the function."""
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name:
        raise SystemExit(
            f"target must look like MODULE:FUNCTION or FILE.py:FUNCTION, got {target!r}"
        )
    if where.endswith(".py"):
        spec = importlib.util.spec_from_file_location("course_worker_target", where)
        if spec is None or spec.loader is None:
            raise SystemExit(f"cannot load {where}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise SystemExit(f"{where} has no function {name!r}")
    return fn


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.ranks.torchrun", description=__doc__
    )
    parser.add_argument("target", help="MODULE:FUNCTION or FILE.py:FUNCTION (no arguments)")
    parser.add_argument("--backend", default="auto", choices=rank_setup.BACKENDS)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for a missing peer")
    args = parser.parse_args(argv)
    rank_setup.join_from_torchrun(args.backend, args.timeout)
    report_results(load_target(args.target)())
    rank_setup.leave(0)


def report_results(result) -> None:
    """Gather every rank's result; rank 0 prints them on one line, in rank order."""
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, result)
    if dist.get_rank() == 0:
        print(RESULTS_PREFIX + json.dumps(gathered, default=repr), flush=True)


if __name__ == "__main__":
    sys.exit(main())
