"""Load a notebook's reference solution (notebooks/solutions/<file>) as a module, for the tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SOLUTIONS = Path(__file__).resolve().parent.parent / "notebooks" / "solutions"


def load_solution(filename: str):
    path = SOLUTIONS / filename
    spec = importlib.util.spec_from_file_location(f"solution_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
