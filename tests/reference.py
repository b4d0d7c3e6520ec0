"""Load a notebook's reference solution (notebooks/solutions/<file>) as a module, for the tests.

A student release (`python -m course_utils release`) has no solutions folder: there, every
test that needs a solution is skipped (a whole module when it loads one at import), so the
learner's `make test` passes and still runs every test that does not need one.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SOLUTIONS = Path(__file__).resolve().parent.parent / "notebooks" / "solutions"


needs_solutions = pytest.mark.skipif(
    not SOLUTIONS.is_dir(), reason="needs notebooks/solutions/, which a student release leaves out"
)  # for a test whose ranks load a solution: a skip raised inside a rank would fail it


def load_solution(filename: str):
    path = SOLUTIONS / filename
    if not SOLUTIONS.is_dir():
        pytest.skip(
            "needs notebooks/solutions/, which a student release leaves out",
            allow_module_level=True,
        )
    spec = importlib.util.spec_from_file_location(f"solution_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
