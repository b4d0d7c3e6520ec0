"""Which cells of a notebook are its exercises: the release clears them, the grade runs them.

An exercise cell is a code cell below the notebook's "## Exercises" (or "## Exercise")
heading, and above its "Going further" if it has one, whose source calls a checker,
`<chapter>.check_<name>(...)`. Each condition matters: a chapter may call a checker to show
a mistake (05's Going further feeds `check_ring` a ring that deadlocks), and the cells
below the heading that call no checker are the exercises' explanations, not exercises.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

HEADING = re.compile(r"^##\s+Exercises?\s*$", re.MULTILINE)
FURTHER = re.compile(r"^#+\s*Going further", re.MULTILINE)  # the core ends, exercises too
CHECKER_CALL = re.compile(r"\bcheck_(\w+)\s*\(")


@dataclass(frozen=True)
class Exercise:
    index: int  # the cell's position in the notebook
    name: str  # the checker's name without check_: "ring", "largest_square"
    defines: tuple[str, ...]  # what the cell defines for the checker: functions, classes, names


def exercises(nb) -> list[Exercise]:
    """The notebook's exercise cells, in order (none when it has no Exercises heading)."""
    start = next(
        (
            i
            for i, cell in enumerate(nb.cells)
            if cell.cell_type == "markdown" and HEADING.search(cell.source)
        ),
        None,
    )
    if start is None:
        return []
    found = []
    for index in range(start + 1, len(nb.cells)):
        cell = nb.cells[index]
        if cell.cell_type == "markdown" and FURTHER.search(cell.source):
            break
        calls = CHECKER_CALL.findall(cell.source) if cell.cell_type == "code" else []
        if calls:
            found.append(Exercise(index, calls[-1], defined_names(cell.source)))
    return found


def defined_names(source: str) -> tuple[str, ...]:
    """Top-level functions, classes and assigned names of a cell (what a solution replaces)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    return tuple(name for node in tree.body for name in names_of(node))


def names_of(node: ast.stmt) -> list[str]:
    """The names a top-level statement defines: a function's or class's, or assigned ones."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    return []


def clear_outputs(nb) -> int:
    """Empty the exercise cells' stored outputs and execution counts; how many were cleared.

    nbval compares no cell whose stored copy was never run, so a learner's `make test`
    passes whatever their exercise cells print.
    """
    cleared = exercises(nb)
    for exercise in cleared:
        cell = nb.cells[exercise.index]
        cell.outputs = []
        cell.execution_count = None
    return len(cleared)
