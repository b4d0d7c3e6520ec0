"""`make notebooks` runs a notebook beside another only if no verdict of it reads the real clock."""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
from notebook_groups import NOTEBOOKS, groups, printed_lines

from course_utils.core.checks import FAIL, NOT_JUDGED, PASS
from course_utils.course.lab_length import stdout_lines

SCRIPT = NOTEBOOKS.parent / "tests" / "notebook_groups.py"


def _notebook(folder, name, *lines):
    stream = {"output_type": "stream", "name": "stdout", "text": list(lines)}
    cells = [{"cell_type": "code", "outputs": [stream]}]
    (folder / name).write_text(json.dumps({"cells": cells}))


def test_every_notebook_is_in_one_group_and_real_clock_verdicts_run_alone():
    found = groups()
    names = {group: [nb.name[:2] for nb in notebooks] for group, notebooks in found.items()}
    assert sorted(names["shared"] + names["alone"]) == [f"{n:02d}" for n in range(12)]
    assert {"01", "04", "05", "06", "09"} <= set(names["alone"])  # real-clock verdicts
    assert {"02", "08", "10"} <= set(names["shared"])  # seeds, bytes, one thread's CPU time


def test_a_verdict_on_the_real_clock_or_not_judged_sends_its_notebook_alone(tmp_path):
    _notebook(tmp_path, "00_a.ipynb", "✓ simulated clock: the ring is faster\n")
    _notebook(tmp_path, "01_b.ipynb", "rows\n", "✗ real clock: the ring is faster\n")
    _notebook(tmp_path, "02_c.ipynb", "? not judged, the machine was busy: the ring …\n")
    _notebook(tmp_path, "03_d.ipynb", "✓ simulated link, real compute: overlap saves\n")
    _notebook(tmp_path, "04_e.ipynb", "the real clock says 2 s\n")  # prose, not a verdict
    _notebook(tmp_path, "05_f.ipynb", "✓ real clock (one thread's CPU time): it costs more\n")
    timings = {"00_a.ipynb": 5, "04_e.ipynb": 50, "05_f.ipynb": 20}
    (tmp_path / "timings.json").write_text(json.dumps({"cpu": timings}))
    found = groups(tmp_path)
    assert [nb.name for nb in found["alone"]] == ["01_b.ipynb", "02_c.ipynb", "03_d.ipynb"]
    shared = ["04_e.ipynb", "05_f.ipynb", "00_a.ipynb"]  # longest first
    assert [nb.name for nb in found["shared"]] == shared


def test_the_shared_notebooks_go_in_the_order_that_ends_soonest(tmp_path):
    """notebooks/timings.json's cpu seconds on 2026-12-01: longest first ends at 169 s on one
    worker and 153 on the other; 10 before 08 ends at 160 and 162."""
    names = ["03", "07", "02", "11", "08", "10", "00"]
    timings = dict(zip(names, (67, 64, 63, 51, 35, 22, 20), strict=True))
    for name in timings:
        _notebook(tmp_path, f"{name}_x.ipynb", "✓ seeds agree\n")
    (tmp_path / "timings.json").write_text(
        json.dumps({"cpu": {f"{n}_x.ipynb": t for n, t in timings.items()}})
    )
    order = [nb.name[:2] for nb in groups(tmp_path)["shared"]]
    assert order == ["03", "07", "02", "11", "10", "08", "00"]


def test_it_reads_the_lines_the_course_reads_verdicts_from():
    assert (PASS, FAIL, NOT_JUDGED[0]) == ("✓", "✗", "?")  # what its pattern starts with
    for notebook in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        cells = nbformat.read(notebook, as_version=4).cells
        assert printed_lines(notebook) == [line for c in cells for line in stdout_lines(c)]


def test_the_script_prints_paths_from_the_repository_and_refuses_a_wrong_group():
    run = [sys.executable, str(SCRIPT)]
    shared = subprocess.run([*run, "shared"], capture_output=True, text=True, check=True)
    assert all(path.startswith("notebooks/") for path in shared.stdout.split())
    wrong = subprocess.run([*run, "both"], capture_output=True, text=True)
    assert wrong.returncode != 0 and "shared|alone" in wrong.stderr


def test_the_unit_stage_orders_files_that_exist():
    """tests/conftest.py runs the files of `file_seconds.json` longest first; a renamed or
    removed file left in it would no longer be found, and the new name would run last."""
    root = NOTEBOOKS.parent
    seconds = json.loads((root / "tests" / "file_seconds.json").read_text())
    assert seconds and all(isinstance(s, (int, float)) and s >= 0 for s in seconds.values())
    assert [p for p in seconds if not (root / p).is_file()] == []
    assert list(seconds.values()) == sorted(seconds.values(), reverse=True)
