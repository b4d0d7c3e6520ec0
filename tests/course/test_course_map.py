"""The README's course map is made from the notebooks: titles, key charts, measured times."""

from __future__ import annotations

import base64
import json

import nbformat
import pytest

from course_utils.course import course_map

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nnot really a picture").decode()


def _notebook(path, title, shows, tagged=True):
    nb = nbformat.v4.new_notebook()
    chart = nbformat.v4.new_code_cell("plot()")
    chart.outputs = [nbformat.v4.new_output("display_data", data={"image/png": PNG})]
    if tagged:
        chart.metadata["tags"] = [course_map.KEY_CHART_TAG]
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\nintro"), chart]
    nb.metadata["course"] = {"shows": shows}
    nbformat.write(nb, path)
    return nb


def test_key_chart_times_and_readme_table(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    nb = _notebook(notebooks / "00_a.ipynb", "00 · First", "what the first shows")
    _notebook(notebooks / "01_b.ipynb", "01 · Second", "what the second shows", tagged=False)
    saved = course_map.save_key_chart(nb, notebooks / "00_a.ipynb")
    assert saved.read_bytes() == base64.b64decode(PNG)
    course_map.record_timings(notebooks, "cpu", {"00_a.ipynb": 12.4, "01_b.ipynb": 61.6})
    course_map.record_timings(notebooks, "gpu", {"00_a.ipynb": 30.0})
    assert json.loads((notebooks / "timings.json").read_text())["cpu"]["01_b.ipynb"] == 62

    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{course_map.START}\nold table\n{course_map.END}\nrest\n")
    assert course_map.update_readme(readme, notebooks)
    text = readme.read_text()
    assert "old table" not in text and text.endswith("rest\n")
    assert "| [00 · First](notebooks/00_a.ipynb) | what the first shows |" in text
    assert (
        '<img src="notebooks/images/00_a.png" width="240"> | NCCL | 0 min | 12 s | 30 s |' in text
    )
    assert "| — | NCCL | 0 min | 62 s | not run yet |" in text  # a minute: 0, to the nearest 5
    assert not course_map.update_readme(readme, notebooks)  # nothing new: unchanged


def test_readme_without_markers_is_refused(tmp_path):
    (tmp_path / "README.md").write_text("no markers\n")
    with pytest.raises(ValueError, match="course-map markers"):
        course_map.update_readme(tmp_path / "README.md", tmp_path)


def test_a_dated_note_of_a_partial_run_stands_in_the_column_as_written(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    _notebook(notebooks / "00_a.ipynb", "00 · First", "what the first shows", tagged=False)
    note = "1 H100, 2026-11-27: stopped at 75 s in cell 8"
    (notebooks / "timings.json").write_text(json.dumps({"gpu": {"00_a.ipynb": note}}))
    course_map.record_timings(notebooks, "cpu", {"00_a.ipynb": 12.4})  # keeps the note
    readme = tmp_path / "README.md"
    readme.write_text(f"{course_map.START}\n{course_map.END}\n")
    course_map.update_readme(readme, notebooks)
    assert f"| 12 s | {note} |" in readme.read_text()
