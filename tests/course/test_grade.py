"""The grade: each exercise cell's verdict read back, the solutions swapped in for the stubs."""

from __future__ import annotations

import json

import nbformat
import pytest

from course_utils.__main__ import main
from course_utils.course import grade
from course_utils.course.exercise_cells import exercises

CHECKER = (
    "def check_double(fn):\n"
    "    ok = fn(2) == 4 and fn(5) == 10\n"
    "    print('✓ doubles' if ok else '✗ double the number, do not add 2')\n"
)


def _notebook(path, body: str, points=None):
    """A tiny course notebook: a first cell (the 'imports'), the heading, one exercise."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(CHECKER),
        nbformat.v4.new_markdown_cell("## Exercises\n\n**1.** Double a number."),
        nbformat.v4.new_code_cell(f"{body}\n\n\ncheck_double(double)"),
        nbformat.v4.new_code_cell("def half(x):\n    return x / 0\n\n\ncheck_half(half)"),
    ]
    if points:
        nb.metadata["course"] = {"points": points}
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("grade")
    path = _notebook(folder / "00_tiny.ipynb", "def double(x):\n    return x + 2", {"double": 2})
    solutions = folder / "solutions"
    solutions.mkdir()
    (solutions / "00_tiny.py").write_text("def double(x):\n    return 2 * x\n")
    return path, solutions


def test_a_learner_notebook_is_graded_cell_by_cell(graded):
    path, _ = graded
    first, second = grade.grade([path])
    assert (first.notebook, first.exercise, first.points, first.passed) == (
        "00_tiny.ipynb", "double", 2.0, False
    )  # fmt: skip
    assert first.mistake == "double the number, do not add 2"
    assert (second.exercise, second.points, second.passed) == ("half", 1.0, False)
    assert second.mistake.startswith("the cell raised NameError")


def test_with_solutions_the_stub_is_replaced(graded):
    path, solutions = graded
    first, second = grade.grade([path], with_solutions=True, solutions=solutions)
    assert first.passed and first.mistake is None
    assert not second.passed  # no solution for half: the notebook's own stub runs


def test_a_missing_solution_file_says_what_to_do(tmp_path, graded):
    path, _ = graded
    with pytest.raises(grade.GradeError, match="instructor's copy"):
        grade.grade([path], with_solutions=True, solutions=tmp_path)


def test_the_solution_replaces_each_definition_right_after_it():
    source = "def my_ring(t):\n    raise NotImplementedError\n\n\ncheck_ring(my_ring)"
    out = grade.with_solution(source, {"my_ring", "other"})
    assert out.splitlines()[2] == "my_ring = __solution__.my_ring"
    assert out.endswith("check_ring(my_ring)")
    assert grade.with_solution("my_config = {}\ncheck(my_config)", {"my_config"}).splitlines() == [
        "my_config = {}", "my_config = __solution__.my_config", "check(my_config)"
    ]  # fmt: skip


def test_outcome_reads_the_last_verdict_or_says_why_there_is_none():
    def cell(*outputs):
        return nbformat.v4.new_code_cell("", outputs=list(outputs))

    stream = nbformat.v4.new_output
    assert grade.outcome(cell(stream("stream", text="12 ms\n✓ fast\n"))) == (True, None)
    assert grade.outcome(cell(stream("stream", text="✗ not solved yet\n"))) == (
        False, "not solved yet"
    )  # fmt: skip
    assert "no verdict" in grade.outcome(cell())[1]


def test_every_course_exercise_has_a_solution_for_what_it_defines():
    """--with-solutions can only pass if each stub's name is in the solution module."""
    pytest.importorskip("reference").load_solution("00_launching.py")  # skips in a release
    from course_utils.course import notebook_files

    for path in notebook_files.course_notebooks():
        names = set(grade._public_names(grade.solution_file(path)))
        for exercise in exercises(nbformat.read(path, as_version=4)):
            assert names & set(exercise.defines), (path.name, exercise)


def test_the_command_prints_json_and_a_results_file(graded, tmp_path, capsys):
    path, _ = graded
    results = tmp_path / "results.json"
    assert main(["grade", str(path), "--json", "--results", str(results)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [e["exercise"] for e in printed["exercises"]] == ["double", "half"]
    assert set(printed["exercises"][0]) == {"notebook", "exercise", "points", "passed", "mistake"}
    written = json.loads(results.read_text())
    assert written["score"] == 0 and written["tests"][0]["max_score"] == 2.0


def test_the_table_totals_the_points():
    rows = [
        grade.Grade("00.ipynb", "a", 2, True, None),
        grade.Grade("00.ipynb", "b", 1, False, "x"),
    ]
    assert grade.format_table(rows).endswith("total: 2 of 3 points")
