"""`python -m course_utils release DIR`: the copy of the course an instructor hands out.

A class gets the notebooks with every exercise cell's stored output cleared (the course's
own run printed "✗ not solved yet" there, and a learner's run must not be compared with
it), the package, the tests and what `make lab` and `make test` need, but no
`notebooks/solutions/`. The tests that run the checkers on the solutions skip themselves
where the folder is absent (`tests/reference.py`), so `make test` passes in the release.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import notebook_files
from .exercise_cells import clear_outputs

ROOT = notebook_files.NOTEBOOK_DIR.parent
# What `make lab` and `make test` need besides the notebooks: files, then folders.
FILES = ("Makefile", "pyproject.toml", "environment.yml", "README.md", ".gitignore")
FOLDERS = ("course_utils", "tests", ".ci")
DATA_FILES = ("README.md",)  # datasets are generated or downloaded on first use
LEFT_OUT = ("solutions",)  # under notebooks/
JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info")


class ReleaseError(ValueError):
    """The release cannot be written where it was asked for."""


@dataclass
class Release:
    directory: Path
    notebooks: list[str] = field(default_factory=list)
    cleared_cells: int = 0

    def summary(self) -> str:
        return (
            f"wrote a student release to {self.directory}: {len(self.notebooks)} notebooks, "
            f"{self.cleared_cells} exercise cells cleared, no notebooks/solutions/. "
            f"In it: `make lab` opens the course, `make test` checks it."
        )


def check_destination(directory: Path, root: Path = ROOT) -> Path:
    """The resolved destination, or a ReleaseError saying why it cannot be used."""
    target, root = Path(directory).resolve(), Path(root).resolve()
    if target == root or root in target.parents:
        raise ReleaseError(
            f"{target} is inside the course's repository ({root}): the release would copy "
            "itself and ship inside the instructor's copy. Choose a folder outside it."
        )
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ReleaseError(
            f"{target} exists and is not empty: a release never mixes with older files. "
            "Choose a new folder, or empty this one first."
        )
    return target


def release(directory: Path, root: Path = ROOT) -> Release:
    """Write the student release of the course at `root` into `directory` (new or empty)."""
    target = check_destination(directory, root)
    root = Path(root).resolve()
    target.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        if (root / name).exists():
            shutil.copy2(root / name, target / name)
    for name in FOLDERS:
        if (root / name).is_dir():
            shutil.copytree(root / name, target / name, ignore=JUNK)
    for name in DATA_FILES:
        if (root / "data" / name).exists():
            (target / "data").mkdir(exist_ok=True)
            shutil.copy2(root / "data" / name, target / "data" / name)
    return _notebooks(root / "notebooks", target / "notebooks", Release(target))


def _notebooks(source: Path, target: Path, done: Release) -> Release:
    """Every file of notebooks/ but the solutions, the course's notebooks with cleared exercises."""
    notebooks = notebook_files.course_notebooks(source)
    skipped = {p.name for p in notebooks} | set(LEFT_OUT)
    shutil.copytree(
        source, target, ignore=lambda folder, names: _ignored(source, folder, names, skipped)
    )
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        done.cleared_cells += clear_outputs(nb)
        nbformat.write(nb, target / path.name)
        done.notebooks.append(path.name)
    return done


def _ignored(source: Path, folder: str, names: list[str], skipped: set[str]) -> set[str]:
    junk = set(JUNK(folder, names))
    if Path(folder).resolve() == source.resolve():
        junk |= skipped & set(names)
    return junk
