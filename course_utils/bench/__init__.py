"""Benchmarks behind `python -m course_utils bench NAME`, one module each.

A module here defines `NAME` (the sub-command), `HELP`, `add_arguments(parser)` and
`run(args) -> dict`; the command prints that dict as JSON with `--json`, or as lines.
Modules are found by listing this package, so a new benchmark is one new file.
"""

from __future__ import annotations

import importlib
import pkgutil


def modules() -> dict:
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        found[module.NAME] = module
    return dict(sorted(found.items()))
