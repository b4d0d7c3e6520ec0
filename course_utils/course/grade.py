"""`python -m course_utils grade [NOTEBOOK ...]`: every exercise's checker verdict, as a grade.

A learner's notebook is executed headless, top to bottom, in a fresh kernel (the checkers
then see the functions the learner wrote), and each exercise cell's last verdict line is
read back: ✓ passes, ✗ names the mistake. With `with_solutions`, the instructor's
self-check, only the notebook's first code cell (its imports and profile) and its exercise
cells run, with each name an exercise cell defines replaced, right after its definition,
by the same name from `notebooks/solutions/NN_*.py`: seconds per notebook, not minutes,
and the very checker calls a learner's notebook makes.

The grade is plain data: a table, `{"exercises": [...]}` for an LMS, or the results.json
that Gradescope reads and otter-grader writes (`results_json`), which needs no dependency.
"""

from __future__ import annotations

import ast
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import nbformat

from ..core.checks import FAIL, PASS
from . import notebook_files
from .exercise_cells import Exercise, exercises, names_of
from .lab_length import stdout_lines
from .runner import columns, first_line_of_error, notebook_client, profile_env

SOLUTIONS_DIR = notebook_files.NOTEBOOK_DIR / "solutions"
SOLUTION = "__solution__"  # the solution module's name in the kernel


class GradeError(ValueError):
    """A notebook cannot be graded as asked."""


@dataclass
class Grade:
    notebook: str
    exercise: str
    points: float
    passed: bool
    mistake: str | None  # the checker's ✗ text, or what went wrong running the cell


def grade(
    paths: list[Path], with_solutions: bool = False, solutions: Path = SOLUTIONS_DIR
) -> list[Grade]:
    """Every exercise of every notebook in `paths`, each with its checker's verdict."""
    grades = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        found = exercises(nb)
        if not found:
            continue
        if with_solutions:
            run, cells = solution_notebook(nb, found, solution_file(path, solutions))
        else:
            run, cells = nb, [e.index for e in found]
        # a fresh kernel that goes on past a failing cell (one broken exercise must not
        # cost the others their points); outputs land in `run`
        notebook_client(run, path.parent, allow_errors=True, record_timing=False).execute()
        points = nb.metadata.get("course", {}).get("points", {})
        for exercise, index in zip(found, cells, strict=True):
            passed, mistake = outcome(run.cells[index])
            worth = float(points.get(exercise.name, 1))
            grades.append(Grade(path.name, exercise.name, worth, passed, mistake))
    return grades


def solution_file(notebook: Path, solutions: Path = SOLUTIONS_DIR) -> Path:
    """notebooks/solutions/NN_*.py for NN_*.ipynb, or a GradeError saying what is missing."""
    number = notebook.name[:2]
    matches = sorted(Path(solutions).glob(f"{number}_*.py"))
    if len(matches) != 1:
        raise GradeError(
            f"{notebook.name}: expected one solution file {solutions}/{number}_*.py, found "
            f"{len(matches)}. --with-solutions needs the instructor's copy with its solutions."
        )
    return matches[0]


def solution_notebook(nb, found: list[Exercise], solution: Path):
    """A notebook of the first code cell, a cell loading `solution`, and the exercise cells
    with the solution's names in place of the stubs; and where each exercise cell landed."""
    first = next(c for c in nb.cells if c.cell_type == "code")
    loader = (
        "import importlib.util as _util\n"
        f"_spec = _util.spec_from_file_location('solution_{solution.stem}', {str(solution)!r})\n"
        f"{SOLUTION} = _util.module_from_spec(_spec)\n"
        f"_spec.loader.exec_module({SOLUTION})"
    )
    cells = [nbformat.v4.new_code_cell(first.source), nbformat.v4.new_code_cell(loader)]
    names = set(_public_names(solution))
    for exercise in found:
        source = with_solution(nb.cells[exercise.index].source, names)
        cells.append(nbformat.v4.new_code_cell(source))
    run = nbformat.v4.new_notebook(cells=cells, metadata=nb.metadata)
    return run, list(range(2, len(cells)))


def _public_names(solution: Path) -> list[str]:
    tree = ast.parse(solution.read_text(encoding="utf-8"))
    return [n for node in tree.body for n in names_of(node) if not n.startswith("_")]


def with_solution(source: str, names: set[str]) -> str:
    """`source` with `name = __solution__.name` after each top-level definition of a name
    the solution has: the stub is still defined (as in the learner's notebook), then replaced."""
    tree = ast.parse(source)
    after: dict[int, list[str]] = {}
    for node in tree.body:
        for name in names_of(node):
            if name in names:
                after.setdefault(node.end_lineno, []).append(f"{name} = {SOLUTION}.{name}")
    lines = []
    for number, line in enumerate(source.splitlines(), 1):
        lines += [line, *after.get(number, [])]
    return "\n".join(lines)


def outcome(cell) -> tuple[bool, str | None]:
    """(passed, the mistake) from an executed exercise cell: its last ✓/✗ line, else its error."""
    error = None
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            error = first_line_of_error(output)
    verdicts = [line for line in stdout_lines(cell) if line.startswith((PASS, FAIL))]
    if error is not None:
        return False, f"the cell raised {error}"
    if not verdicts:
        return False, "the cell printed no verdict: keep the checker call at its end"
    last = verdicts[-1]
    return (True, None) if last.startswith(PASS) else (False, last[len(FAIL) :].strip())


def as_json(grades: list[Grade]) -> dict:
    """What an LMS reads: one entry per exercise."""
    return {"exercises": [asdict(g) for g in grades]}


def results_json(grades: list[Grade], seconds: float | None = None) -> dict:
    """The results.json Gradescope reads (and otter-grader writes): a score per test."""
    tests = [
        {
            "name": f"{g.notebook}: {g.exercise}",
            "score": g.points if g.passed else 0.0,
            "max_score": g.points,
            "output": "passed" if g.passed else g.mistake or "failed",
        }
        for g in grades
    ]
    out = {"score": sum(t["score"] for t in tests), "tests": tests}
    if seconds is not None:
        out["execution_time"] = round(seconds, 1)
    return out


def format_table(grades: list[Grade]) -> str:
    rows = [("notebook", "exercise", "points", "passed", "mistake")]
    for g in grades:
        rows.append((g.notebook, g.exercise, f"{g.points:g}", "✓" if g.passed else "✗",
                     g.mistake or ""))  # fmt: skip
    lines = columns(rows)
    earned = sum(g.points for g in grades if g.passed)
    lines.append(f"total: {earned:g} of {sum(g.points for g in grades):g} points")
    return "\n".join(lines)


def cli(args) -> int:
    """The `grade` command: 1 when --with-solutions fails an exercise (the course is broken)."""
    import json

    paths = notebook_files.resolve(args.notebooks)
    start = time.perf_counter()
    with profile_env(args.profile):
        grades = grade(paths, with_solutions=args.with_solutions)
    seconds = time.perf_counter() - start
    if args.results:
        Path(args.results).write_text(json.dumps(results_json(grades, seconds), indent=1))
    print(json.dumps(as_json(grades), indent=1) if args.json else format_table(grades))
    return 1 if args.with_solutions and not all(g.passed for g in grades) else 0


def add_arguments(parser) -> None:
    parser.add_argument("notebooks", nargs="*", help="paths, names or numbers; default: all")
    parser.add_argument(
        "--with-solutions",
        action="store_true",
        help="grade notebooks/solutions/ instead (the instructor's self-check)",
    )
    parser.add_argument("--json", action="store_true", help='print {"exercises": [...]}')
    parser.add_argument("--results", help="also write a Gradescope/otter-style results.json")
    parser.add_argument("--profile", choices=["cpu", "gpu"], default=None)
