"""The browser test of one notebook, in the order a learner meets the problems:

1. Restart and Run All, timed until the last cell is done; while it runs, note the moments
   the kernel has ranks running. Save; count error outputs and ✗ verdicts in the saved file.
2. Move one control of every widget and wait for its picture to change.
3. Run the longest cell that had ranks running again, press Stop once its ranks are up, and
   5 s later count the processes left.
4. Save, shut the kernel down, close the tab, reopen the notebook in a fresh page, and
   count the outputs that show "Error displaying widget" instead of the saved widget.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import outputs
from lab_server import LabServer
from notebook_page import CELLS, NotebookPage
from processes import describe, kernel_process, leftovers, rank_count
from widgets import check_redraws

STOP_AFTER = 2.5  # seconds after Run before Stop, at the least
RANKS_WAIT = 20  # at most this long for the cell's ranks to come up before Stop
SETTLE_AFTER_STOP = 5  # seconds between Stop and counting what is left


@dataclass
class NotebookResult:
    notebook: str
    seconds: float | None = None
    errors: int | None = None
    crosses: int | None = None
    widget_errors_after_reopen: int | None = None
    processes_left_after_stop: int | None = None
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        """The entry of summary.json: counts, 0 where clean, null where not measured."""
        keys = ("notebook", "seconds", "errors", "crosses")
        keys += ("widget_errors_after_reopen", "processes_left_after_stop")
        return {key: getattr(self, key) for key in keys}

    @property
    def clean(self) -> bool:
        counts = (self.errors, self.crosses, self.widget_errors_after_reopen)
        return all(c == 0 for c in (*counts, self.processes_left_after_stop))


def run_all(nb: NotebookPage, result: NotebookResult, shots: Path, timeout: float):
    """Restart and Run All; returns the moments (time.time()) the kernel had ranks running."""
    kernel_id = nb.lab.kernel_id(nb.name)
    moments: list[float] = []

    def sample() -> None:
        if rank_count(kernel_process(kernel_id, nb.lab.server_pid)):
            moments.append(time.time())

    started = time.monotonic()
    nb.restart_and_run_all()
    finished = nb.wait_until_done(timeout, every=sample, run_all=True)
    result.seconds = round(time.monotonic() - started, 1)
    if not finished:
        result.notes.append(f"Run All had not finished after {timeout:.0f} s; stopped it")
        nb.stop()
        nb.wait_until_done(60)
    result.notes += [f"dialog during Run All: {text}" for text in nb.dismiss_dialogs(shots)]
    return moments


def count_outputs(nb: NotebookPage, result: NotebookResult, shots: Path) -> dict:
    """Errors and ✗ lines of the saved notebook, with a screenshot of the first of them."""
    saved = nb.lab.saved_notebook(nb.name)
    errors, crosses = outputs.error_cells(saved), outputs.cross_lines(saved)
    unreached = outputs.unexecuted_cells(saved)
    result.errors = len(errors) + (1 if unreached and not errors else 0)
    result.crosses = len(crosses)
    for index, text in errors:
        result.notes.append(f"error output in cell {index}: {text}")
    for index, line in crosses:
        result.notes.append(f"✗ in cell {index}: {line}")
    if unreached:
        result.notes.append(f"cells never run: {unreached[:10]}")
    problems = [index for index, _ in errors + crosses]
    at = nb.cell(problems[0]) if problems else nb.page.locator(CELLS).last
    nb.screenshot(shots / "after_run.png", at=at)
    return saved


def redraw_widgets(nb: NotebookPage, result: NotebookResult, saved: dict, shots: Path):
    """Widgets that do not redraw count as errors (the summary has no field of their own)."""
    for redraw in check_redraws(nb, outputs.widget_outputs(saved), shots):
        word = {True: "redrew", False: "did NOT redraw", None: "not checked"}[redraw.redrawn]
        result.notes.append(f"widget in cell {redraw.cell} {word} after {redraw.what}")
        result.errors += 1 if redraw.redrawn is False else 0


def stop_longest_rank_cell(nb: NotebookPage, result: NotebookResult, saved, moments, shots):
    """Run the chosen cell, press Stop once its ranks are up, count what is left 5 s later."""
    index, had_ranks = outputs.longest_rank_cell(outputs.cell_spans(saved), moments)
    kernel_id = nb.lab.kernel_id(nb.name)
    nb.run_cell(index)
    started, ranks_up = time.monotonic(), False
    while True:
        time.sleep(0.2)
        elapsed = time.monotonic() - started
        ranks_up = rank_count(kernel_process(kernel_id, nb.lab.server_pid)) > 0
        ended = elapsed > 1 and index not in nb.busy_cells()
        if ended or (elapsed >= STOP_AFTER and (ranks_up or elapsed >= RANKS_WAIT)):
            break
    nb.stop()
    time.sleep(SETTLE_AFTER_STOP)
    left = leftovers(kernel_id, nb.lab.marker, nb.lab.own_pids(), nb.lab.server_pid)
    result.processes_left_after_stop = len(left)
    what = "the longest cell with ranks" if had_ranks else "no cell had ranks; the longest cell"
    when = "with its ranks running" if ranks_up else "with no rank running"
    when = "after it had ended" if ended else when
    result.notes.append(f"Stop: {what}, cell {index}, pressed {when}; {len(left)} left")
    if left:
        result.notes.append("processes left after Stop:\n" + describe(left))
    nb.screenshot(shots / "after_stop.png", at=nb.cell(index))
    nb.wait_until_done(60)
    result.notes += [f"dialog after Stop: {text}" for text in nb.dismiss_dialogs(shots)]


def reopen(nb: NotebookPage, result: NotebookResult, shots: Path) -> None:
    """Save, shut down, close, reopen; count the widget outputs that show an error, or
    nothing, instead of the widget drawn from the state saved with the notebook."""
    nb.save()
    if nb.shut_down_kernel_and_close():
        result.notes.append("closing after the save asked to save again (discarded)")
    nb.open()
    expected = outputs.widget_outputs(nb.lab.saved_notebook(nb.name))
    states = nb.wait_for_widgets(expected)
    broken = [where for where, state in states.items() if state != "drawn"]
    result.widget_errors_after_reopen = len(broken)
    for cell, position in broken:
        path = shots / f"widget_error_after_reopen_cell{cell}_output{position}.png"
        nb.shoot(nb.cell(cell), path)
        says = "an error" if states[cell, position] == "error" else "nothing after 60 s"
        result.notes.append(f"after reopen, widget output {position} of cell {cell} shows {says}")
    for cell in expected:
        nb.shoot(nb.cell(cell), shots / f"widget_cell{cell}_after_reopen.png")
    first = broken[0][0] if broken else next(iter(expected), None)
    nb.screenshot(shots / "after_reopen.png", at=None if first is None else nb.cell(first))
    if nb.shut_down_kernel_and_close():
        result.notes.append(
            "reopening alone marked the notebook modified; closing asked to save (discarded: "
            "saving now would drop the widget state, ipywidgets issue #3888)"
        )


def check_notebook(nb: NotebookPage, result: NotebookResult, shots: Path, timeout: float):
    shots.mkdir(parents=True, exist_ok=True)
    nb.open()
    moments = run_all(nb, result, shots, timeout)
    nb.save()
    saved = count_outputs(nb, result, shots)  # before Stop adds its KeyboardInterrupt
    redraw_widgets(nb, result, saved, shots)
    stop_longest_rank_cell(nb, result, saved, moments, shots)
    reopen(nb, result, shots)


def check_in_browser(page, lab: LabServer, name: str, out: Path, timeout: float):
    """check_notebook, recording a failure of the test itself as an error of the notebook."""
    nb, result = NotebookPage(page, lab, name), NotebookResult(name)
    shots = out / Path(name).stem
    try:
        check_notebook(nb, result, shots, timeout)
    except Exception as error:  # noqa: BLE001 - reported, and the next notebook still runs
        result.errors = (result.errors or 0) + 1
        frames = traceback.extract_tb(error.__traceback__)
        where = [f for f in frames if Path(f.filename).parent == Path(__file__).parent][-1]
        at = f"{Path(where.filename).name}:{where.lineno}"
        result.notes.append(f"the browser test failed at {at}: {type(error).__name__}: {error}")
        try:
            page.screenshot(path=str(shots / "test_failed.png"))
            lab.shut_down_kernels()
        except Exception:  # noqa: BLE001 - the note above says what went wrong
            pass
    return result
