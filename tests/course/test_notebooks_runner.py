"""The runner executes a notebook headless, counts its verdicts and stores it stably."""

from __future__ import annotations

import json
import os

import nbformat
import pytest

from course_utils.core.checks import verdict
from course_utils.course import notebook_files
from course_utils.course import runner as notebooks


def _notebook(path, *cells, tags=None):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    if tags:
        for index, tag in tags.items():
            nb.cells[index].metadata["tags"] = [tag]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    nbformat.write(nb, path)
    return path


def test_counts_verdicts_and_failed_ones(tmp_path):
    path = _notebook(
        tmp_path / "01_demo.ipynb",
        "from course_utils.core.checks import verdict",
        "verdict(True, 'holds'); verdict(1 > 2, 'one is more than two')\n"
        "verdict(False, 'not solved yet')",
        "raise ValueError('expected')",
        tags={2: "raises-exception"},
    )
    report = notebooks.execute(path, write=True)
    assert report.error is None
    assert report.verdicts == 3  # the unsolved exercise is counted, not failed
    assert report.failed_verdicts == ["cell 1: ✗ one is more than two"]
    assert not report.ok
    stored = json.loads(path.read_text())
    assert "widgets" not in stored["metadata"]
    assert all("execution" not in c["metadata"] for c in stored["cells"])


def test_a_busy_machine_is_counted_as_not_judged_not_as_failed(tmp_path):
    path = _notebook(
        tmp_path / "01_busy.ipynb",
        "from course_utils.core.checks import MachineShare, verdict\n"
        "verdict(False, 'fast', MachineShare(cores=2, seconds=1, others_cores=1, machine_cores=2))",
    )
    report = notebooks.execute(path)
    assert (report.verdicts, report.not_judged, report.failed_verdicts) == (0, 1, [])
    assert report.ok
    assert "not judged" in notebooks.format_table([report])


def test_an_error_is_reported_with_its_cell(tmp_path):
    path = _notebook(tmp_path / "02_broken.ipynb", "1 / 0")
    report = notebooks.execute(path)
    assert report.error.startswith("ZeroDivisionError")
    assert "ZeroDivisionError" in notebooks.format_table([report])


def test_resolve_by_number_and_refuse_unknown(tmp_path):
    _notebook(tmp_path / "03_x.ipynb", "pass")
    assert notebook_files.resolve(["03"], tmp_path)[0].name == "03_x.ipynb"
    with pytest.raises(FileNotFoundError, match="known: 03_x.ipynb"):
        notebook_files.resolve(["99"], tmp_path)


def test_verdict_prints_one_stable_line(capsys):
    assert verdict(True, "the claim")
    assert not verdict(0, "the other claim")
    assert capsys.readouterr().out == "✓ the claim\n✗ the other claim\n"


def test_compare_flags_changed_cells_unless_marked(tmp_path):
    path = _notebook(
        tmp_path / "04_changes.ipynb",
        "print('same every time')",
        "import os; print(os.getpid())",
        "# NBVAL_IGNORE_OUTPUT\nimport time; print(time.time())",
    )
    notebooks.execute(path, write=True)
    report = notebooks.execute(path, compare=True)
    assert report.unstable_cells == ["cell 1: import os; print(os.getpid())"]
    assert not report.ok
    assert "not marked NBVAL_IGNORE_OUTPUT" in notebooks.format_table([report])


def test_compare_sees_a_widget_as_its_stored_picture(tmp_path):
    def widget(picture: str) -> str:
        return (
            "from IPython.display import display\n"
            "import time\n"
            "view = {'model_id': str(time.time_ns()), 'version_major': 2}\n"
            "display({'application/vnd.jupyter.widget-view+json': view, "
            f"'image/png': {picture}, 'text/plain': 'Canvas()'}}, raw=True)"
        )

    path = _notebook(tmp_path / "06_widget.ipynb", widget("'iVBOR'"), widget("str(time.time())"))
    notebooks.execute(path, write=True)
    report = notebooks.execute(path, compare=True)
    assert [c.split(":")[0] for c in report.unstable_cells] == ["cell 1"]


def test_stream_chunks_are_stored_as_one_output(tmp_path):
    path = _notebook(
        tmp_path / "05_chunks.ipynb",
        "import sys, time\nfor i in range(3):\n    print(i, flush=True); time.sleep(0.05)",
    )
    notebooks.execute(path, write=True)
    outputs = json.loads(path.read_text())["cells"][0]["outputs"]
    assert len(outputs) == 1 and "".join(outputs[0]["text"]) == "0\n1\n2\n"


def test_a_stored_widget_keeps_only_its_picture_and_the_kernelspec_is_jupyterlabs(tmp_path):
    view = {"application/vnd.jupyter.widget-view+json": {"model_id": "x", "version_major": 2}}
    picture = {"image/png": "iVBOR", "text/html": "<div>Figure</div>", "text/plain": "Canvas()"}
    shown = [
        {**view, "text/plain": "HBox(children=(Dropdown(...),))"},
        {**view, **picture},
        {"text/plain": "42"},
    ]
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("explorer()")
    cell.outputs = [nbformat.v4.new_output("display_data", data=d) for d in shown]
    nb.cells = [cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    path = tmp_path / "widget.ipynb"
    notebooks.store(nb, path)
    stored = json.loads(path.read_text())
    kept = [o["data"] for o in stored["cells"][0]["outputs"]]
    assert kept[0] == {"image/png": "iVBOR"} and list(kept[1]) == ["text/plain"] and len(kept) == 2
    assert stored["metadata"]["kernelspec"]["display_name"] == "Python 3 (ipykernel)"


def test_a_slow_cell_without_a_progress_bar_is_reported():
    from course_utils.course import runner

    def cell(seconds, outputs=()):
        start = "2026-11-25T10:00:00.000000Z"
        end = f"2026-11-25T10:00:{seconds:02d}.000000Z"
        timing = {"iopub.execute_input": start, "shell.execute_reply": end}
        return {"cell_type": "code", "metadata": {"execution": timing}, "outputs": list(outputs)}

    bar = {
        "output_type": "display_data",
        "data": {
            "text/plain": "trials:  50%|#####     | 2/4",
            "application/vnd.jupyter.widget-view+json": {"model_id": "x"},
        },
    }
    assert runner._cell_seconds(cell(7)) == 7.0
    assert runner._cell_seconds({"cell_type": "code", "metadata": {}}) == 0.0
    assert not runner._showed_progress(cell(7))
    assert runner._showed_progress(cell(7, [bar]))
    picture = {"output_type": "display_data", "data": {"text/plain": "Figure"}}
    assert not runner._showed_progress(cell(7, [picture]))


def test_a_closed_bar_leaves_no_widget_behind_only_where_it_stopped(tmp_path):
    """A saved notebook reopened with a new kernel must not say "model not found" where
    a bar was: a finished bar leaves an empty output (its last line in the metadata), a
    bar stopped early leaves that line as text."""
    path = _notebook(
        tmp_path / "02_bars.ipynb",
        "import time\nfrom course_utils.core import progress\n"
        "done = progress.bar(3, 'finished steps', 'step')\n"
        "for _ in range(3):\n    time.sleep(0.5); done.update()\ndone.close()",
        "stopped = progress.bar(4, 'stopped steps', 'step')\n"
        "time.sleep(1.2); stopped.update(); stopped.close()",
    )
    report = notebooks.execute(path, write=True)
    assert report.error is None, report
    cells = nbformat.read(path, 4).cells
    outputs = [o for c in cells for o in c.outputs]
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
    assert cells[0].outputs == []  # the finished bar's empty line is not stored
    (stopped,) = cells[1].outputs
    assert "stopped steps" in stopped.data["text/plain"] and "1/4" in stopped.data["text/plain"]


def test_a_finished_bars_empty_line_counts_as_progress_and_is_not_stored():
    from course_utils.core.progress import BAR_KEY

    left = nbformat.v4.new_output(
        "display_data", data={"text/plain": ""}, metadata={BAR_KEY: "steps: 100%|##| 3/3"}
    )
    timing = {
        "iopub.execute_input": "2026-11-25T10:00:00Z",
        "shell.execute_reply": "2026-11-25T10:00:09Z",
    }
    cell = {"cell_type": "code", "metadata": {"execution": timing}, "outputs": [left]}
    assert notebooks._showed_progress(cell)
    assert notebooks.static_output(left) is None
    stopped = nbformat.v4.new_output(
        "display_data", data={"text/plain": "steps: 33%|#| 1/3"}, metadata={BAR_KEY: "..."}
    )
    assert notebooks.static_output(stopped) is stopped


def test_profile_env_sets_the_profile_inside_and_restores_it_after(monkeypatch):
    monkeypatch.delenv("COURSE_PROFILE", raising=False)
    with notebooks.profile_env("gpu"):
        assert os.environ["COURSE_PROFILE"] == "gpu"
    assert "COURSE_PROFILE" not in os.environ
    monkeypatch.setenv("COURSE_PROFILE", "cpu")
    with notebooks.profile_env(None):
        assert os.environ["COURSE_PROFILE"] == "cpu"
    with notebooks.profile_env("gpu"):
        pass
    assert os.environ["COURSE_PROFILE"] == "cpu"
