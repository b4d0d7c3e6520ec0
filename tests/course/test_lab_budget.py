"""The lab-length script counts what a learner reads and the verdicts they are shown, and
splits them at "Going further"."""

from __future__ import annotations

import json
from pathlib import Path

from lab_budget import table

from course_utils.course.lab_length import CORE_LIMITS, FURTHER_LIMITS, budget, core_minutes


def _cell(kind: str, source: str, *lines: str) -> dict:
    cell = {"cell_type": kind, "source": source.splitlines(keepends=True), "metadata": {}}
    if kind == "code":
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": list(lines)}]
        cell["execution_count"] = None
    return cell


def test_words_and_verdicts_are_counted_on_each_side_of_going_further(tmp_path):
    cells = [
        _cell("markdown", "# Title\n\nFour words of prose.\n\n```python\nx = 1  # code\n```"),
        _cell(
            "code",
            "check()",
            "a value 3.2\n",
            "✓ held\n",
            "? not judged, the machine was busy: a claim\n",
        ),
        _cell("code", "exercise()", "✗ not solved yet\n", "✗ failed\n"),
        _cell("markdown", "## Going further\n\nOne more."),
        _cell("code", "more()", "✓ also held\n"),
    ]
    cells[1]["outputs"].append(
        {"output_type": "display_data", "data": {"text/markdown": "Two words"}, "metadata": {}}
    )
    notebook = tmp_path / "99_example.ipynb"
    stored = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 4}
    notebook.write_text(json.dumps(stored))
    core, further = budget(notebook)
    assert (core.words, core.verdicts, core.exercises) == (1 + 4 + 2, 3, 1)  # the fence left out
    assert (further.words, further.verdicts) == (2 + 2, 1)
    assert "99_example.ipynb" in table([notebook]) and table([notebook]).count("yes") == 1
    # 7 words, 3 verdicts, 1 exercise, 2 minutes' run: 0.07 + 6 + 10 + 2 minutes, to 5
    assert core_minutes(notebook, run_seconds=120) == 20


def test_every_stored_notebook_fits_one_lab_session():
    """The guide's rule, on the notebooks as stored: a core a newcomer works through in 90
    minutes, and a "Going further" an expert reads; the limits are `lab_length`'s."""
    notebooks = sorted((Path(__file__).parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(notebooks) == 12
    for path in notebooks:
        core, further = budget(path)
        assert core.within(CORE_LIMITS), (path.name, core)
        assert further.within(FURTHER_LIMITS), (path.name, further)
