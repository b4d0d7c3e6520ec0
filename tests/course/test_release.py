"""The student release: no solutions, exercise cells cleared, everything `make test` needs."""

from __future__ import annotations

import nbformat
import pytest

from course_utils.__main__ import main
from course_utils.course import notebook_files
from course_utils.course.exercise_cells import clear_outputs, exercises
from course_utils.course.release import ROOT, ReleaseError, check_destination, release


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    target = tmp_path_factory.mktemp("release") / "class"
    return release(target), target


def test_the_release_has_what_make_test_needs_and_no_solutions(released):
    done, target = released
    for name in ("Makefile", "pyproject.toml", "environment.yml", "README.md", ".ci/run"):
        assert (target / name).is_file(), name
    assert (target / "course_utils" / "__main__.py").is_file()
    assert (target / "tests" / "reference.py").is_file()
    assert (target / "data" / "README.md").is_file()
    assert not list((target / "data").glob("*.npz")), "datasets are made on first use"
    assert not (target / "notebooks" / "solutions").exists()
    assert not list(target.rglob("__pycache__"))
    names = [p.name for p in notebook_files.course_notebooks()]
    assert done.notebooks == names
    assert sorted(p.name for p in notebook_files.course_notebooks(target / "notebooks")) == names


def test_every_exercise_cell_is_cleared_and_nothing_else(released):
    done, target = released
    total = 0
    for path in notebook_files.course_notebooks():
        ours = nbformat.read(path, as_version=4)
        theirs = nbformat.read(target / "notebooks" / path.name, as_version=4)
        cleared = {e.index for e in exercises(ours)}
        total += len(cleared)
        for index, (a, b) in enumerate(zip(ours.cells, theirs.cells, strict=True)):
            assert a.source == b.source
            if index in cleared:
                assert b.outputs == [] and b.execution_count is None
            elif a.cell_type == "code":
                assert b.outputs == a.outputs
    assert done.cleared_cells == total > 10


def test_a_destination_inside_the_repository_is_refused():
    with pytest.raises(ReleaseError, match="inside the course's repository"):
        check_destination(ROOT / "build" / "release")
    with pytest.raises(ReleaseError, match="outside it"):
        check_destination(ROOT)


def test_a_folder_that_is_not_empty_is_refused(tmp_path, capsys):
    (tmp_path / "old.txt").write_text("an older release")
    with pytest.raises(ReleaseError, match="exists and is not empty"):
        release(tmp_path)
    assert main(["release", str(tmp_path)]) == 1
    assert "Choose a new folder" in capsys.readouterr().err


def test_an_empty_folder_is_accepted(tmp_path):
    assert check_destination(tmp_path) == tmp_path.resolve()


def test_the_checker_call_in_the_prose_is_not_an_exercise():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("allreduce.check_ring(broken)  # showing a mistake"),
        nbformat.v4.new_markdown_cell("## Summary\n\n## Exercises\n\n**1.** Write a ring."),
        nbformat.v4.new_code_cell("def my_ring(t):\n    raise NotImplementedError"),
        nbformat.v4.new_code_cell("def my_ring(t):\n    pass\n\n\nallreduce.check_ring(my_ring)"),
    ]
    for cell in (nb.cells[0], nb.cells[3]):
        cell.outputs = [nbformat.v4.new_output("stream", text="✗ not solved yet\n")]
        cell.execution_count = 1
    assert [(e.index, e.name, e.defines) for e in exercises(nb)] == [(3, "ring", ("my_ring",))]
    assert clear_outputs(nb) == 1
    assert nb.cells[0].outputs and not nb.cells[3].outputs
    nb.cells += [
        nbformat.v4.new_markdown_cell("## Going further\n\n### When a ring deadlocks"),
        nbformat.v4.new_code_cell("allreduce.check_ring(receive_first)  # showing a mistake"),
    ]
    assert [e.index for e in exercises(nb)] == [3]  # the exercises end where the core does


def test_a_notebook_without_an_exercises_heading_has_no_exercise():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x.check_ring(f)")])
    assert exercises(nb) == []
