"""The benchmarks behind `python -m course_utils bench NAME`, found in the chapter folders.

A chapter's `bench.py` (or `bench_<what>.py`, when it has more than one) defines `NAME`
(the sub-command), `HELP`, `add_arguments(parser)` and `run(args) -> dict`; the command
prints that dict as JSON with `--json`, or as lines (its `text(result)`, where it has
one). They are found by listing the chapters, so a new benchmark is one new file beside
the code it measures.
"""

from __future__ import annotations

import importlib
import pkgutil

import course_utils


def modules() -> dict:
    found = {}
    for chapter in pkgutil.iter_modules(course_utils.__path__):
        if not chapter.ispkg:
            continue
        package = importlib.import_module(f"course_utils.{chapter.name}")
        for info in pkgutil.iter_modules(package.__path__):
            if info.name == "bench" or info.name.startswith("bench_"):
                module = importlib.import_module(f"{package.__name__}.{info.name}")
                found[module.NAME] = module
    return dict(sorted(found.items()))
