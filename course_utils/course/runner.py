"""Execute the course's notebooks headless, report on each, and store them executed.

This is how the committed outputs are made (`python -m course_utils run --write`) and how
an instructor checks a lab machine before class: per notebook, the wall time, how many
verdict lines it printed, and any ✗ or error with the cell it came from.
"""

from __future__ import annotations

import copy
import os
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from unittest import mock

import nbformat

from ..core.checks import FAIL, NOT_JUDGED, NOT_SOLVED, PASS
from ..core.progress import BAR_KEY
from .course_map import save_key_chart
from .lab_length import stdout_lines
from .memory import PeakMemory

CELL_TIMEOUT = 600
SLOW_CELL = 5.0  # seconds a learner waits on a cell before it should show progress


@dataclass
class Report:
    notebook: str
    seconds: float
    verdicts: int = 0
    not_judged: int = 0  # real-clock verdicts whose measurement other programs slowed
    failed_verdicts: list[str] = field(default_factory=list)
    error: str | None = None
    unstable_cells: list[str] = field(default_factory=list)  # with compare=True
    peak_pss_mib: float | None = None  # the kernel and its ranks at their largest
    # cells that ran longer than SLOW_CELL seconds and showed no progress bar meanwhile
    slow_cells: list[str] = field(default_factory=list)
    cell_seconds: dict[int, float] = field(default_factory=dict)  # cells of a second or more

    @property
    def ok(self) -> bool:
        return self.error is None and not self.failed_verdicts and not self.unstable_cells

    def as_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def profile_env(profile: str | None):
    """COURSE_PROFILE for the kernels started inside, as it was again afterwards."""
    return mock.patch.dict(os.environ, {"COURSE_PROFILE": profile} if profile else {})


IGNORE_MARK = "NBVAL_IGNORE_OUTPUT"


def notebook_client(nb, directory: Path, **options):
    """A client for `nb` in a fresh kernel started in `directory`, as its relative paths expect."""
    from nbclient import NotebookClient

    return NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(directory)}},
        **options,
    )


def execute(
    path: Path, profile: str | None = None, write: bool = False, compare: bool = False
) -> Report:
    """Run one notebook top to bottom in a fresh kernel; optionally store it executed.

    With `compare`, every cell whose output differs from the stored copy must be marked
    `# NBVAL_IGNORE_OUTPUT` (its output depends on timings, process ids or arrival order);
    any other change is reported, since a re-run of an unchanged course should not make it.
    """
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    stored = [_output_signature(c) for c in nb.cells] if compare else []
    client = notebook_client(nb, path.parent, record_timing=True)
    start = time.perf_counter()
    error = None
    with profile_env(profile), PeakMemory(lambda: _kernel_pid(client)) as peak:
        try:
            client.execute()
        except CellExecutionError as exc:
            error = first_line_of_error(exc)
        except Exception as exc:  # a dead kernel, a timeout
            error = f"{type(exc).__name__}: {exc}"
    seconds = round(time.perf_counter() - start, 1)
    report = Report(notebook=path.name, seconds=seconds, error=error, peak_pss_mib=peak.mib)
    for index, cell in enumerate(nb.cells):
        for line in stdout_lines(cell):
            if line.startswith((PASS, FAIL)):
                report.verdicts += 1
            if line.startswith(NOT_JUDGED):
                report.not_judged += 1
            if line.startswith(FAIL) and line != f"{FAIL} {NOT_SOLVED}":
                report.failed_verdicts.append(f"cell {index}: {line}")
    report.cell_seconds = {
        i: round(seconds, 1)
        for i, cell in enumerate(nb.cells)
        if (seconds := _cell_seconds(cell)) >= 1.0
    }
    report.slow_cells = [
        f"cell {i}: {seconds:.0f} s, no progress bar"
        for i, cell in enumerate(nb.cells)
        if (seconds := _cell_seconds(cell)) > SLOW_CELL and not _showed_progress(cell)
    ]
    if compare and error is None:
        report.unstable_cells = [
            f"cell {i}: {cell.source.splitlines()[0][:60] if cell.source else ''}"
            for i, (cell, before) in enumerate(zip(nb.cells, stored, strict=True))
            if _output_signature(cell) != before and IGNORE_MARK not in cell.get("source", "")
        ]
    if write and error is None:
        store(nb, path)
        save_key_chart(nb, path)
    return report


def _cell_seconds(cell) -> float:
    """How long the kernel took to run the cell (nbclient's timestamps), 0 if unknown."""
    timing = cell.get("metadata", {}).get("execution", {})
    started, ended = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (started and ended):
        return 0.0
    return (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()


def _showed_progress(cell) -> bool:
    """Whether a progress bar was displayed: a widget whose text is tqdm's ("...  50%|##"),
    or the output a closed bar left, its last line in the metadata (`progress.BAR_KEY`)."""
    return any(
        BAR_KEY in output.get("metadata", {})
        or (
            "application/vnd.jupyter.widget-view+json" in output.get("data", {})
            and "%|" in output["data"].get("text/plain", "")
        )
        for output in cell.get("outputs", [])
    )


def _kernel_pid(client) -> int | None:
    """The pid of the client's kernel once it has started (None before)."""
    process = getattr(getattr(getattr(client, "km", None), "provisioner", None), "process", None)
    return getattr(process, "pid", None)


def _coalesced(outputs: list) -> list:
    """Consecutive chunks of one stream as one output: how the kernel splits text is timing."""
    merged: list = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (
            output.get("output_type") == "stream"
            and previous is not None
            and previous.get("output_type") == "stream"
            and previous.get("name") == output.get("name")
        ):
            previous["text"] = previous.get("text", "") + output.get("text", "")
        else:
            merged.append(output)
    return merged


def _output_signature(cell) -> list:
    """What a cell showed, as `store` keeps it (a widget as its picture): its streams, its
    pictures and texts, its errors. A fresh run is compared with the stored copy."""
    if cell.get("cell_type") != "code":
        return []
    signature = []
    kept = [static_output(copy.deepcopy(o)) for o in cell.get("outputs", [])]
    for output in _coalesced([o for o in kept if o is not None]):
        kind = output.get("output_type")
        if kind == "stream":
            signature.append((output.get("name"), output.get("text")))
        elif kind in ("display_data", "execute_result"):
            signature.append(sorted((k, str(v)) for k, v in output.get("data", {}).items()))
        elif kind == "error":
            signature.append(("error", output.get("ename")))
    return signature


def first_line_of_error(exc) -> str:
    """'ename: evalue', its first line: of a CellExecutionError or an error output alike."""
    ename = getattr(exc, "ename", type(exc).__name__)
    evalue = getattr(exc, "evalue", str(exc))
    return f"{ename}: {evalue}".splitlines()[0][:300]


KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def store(nb, path: Path) -> None:
    """Write with stable metadata: no widget state (GitHub cannot render it), no timings.

    A widget's stored output keeps only its static picture: without the live widget, a
    reader would see its text repr ("HBox(children=...") or a "Figure" label instead. The
    kernelspec is the one JupyterLab writes, so opening a notebook does not mark it modified.
    """
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.get("cell_type") == "code":
            outputs = [static_output(o) for o in _coalesced(cell.get("outputs", []))]
            cell.outputs = [o for o in outputs if o is not None]
    nbformat.write(nb, path)


def static_output(output):
    """The output as the web shows it: a widget reduced to its picture, or dropped, and so
    is what a finished progress bar left (an empty line)."""
    data = output.get("data", {})
    if BAR_KEY in output.get("metadata", {}) and not data.get("text/plain"):
        return None
    if data.pop("application/vnd.jupyter.widget-view+json", None) is None:
        return output
    if "image/png" in data:
        output["data"] = {"image/png": data["image/png"]}
        return output
    return None


def columns(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows as aligned text; the last column, free text that may be long, is left unpadded."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in rows
    ]


def format_table(reports: list[Report]) -> str:
    rows = [("notebook", "seconds", "verdicts", "not judged", "result")]
    for r in reports:
        result = (
            "ok"
            if r.ok
            else (r.error or f"{len(r.failed_verdicts)} ✗, {len(r.unstable_cells)} changed")
        )
        rows.append((r.notebook, f"{r.seconds:.1f}", str(r.verdicts), str(r.not_judged), result))
    lines = columns(rows)
    for r in reports:
        lines += [f"  {r.notebook}: {line}" for line in r.failed_verdicts]
        lines += [f"  {r.notebook}: {cell}" for cell in r.slow_cells]
        lines += [
            f"  {r.notebook}: changed, not marked {IGNORE_MARK}: {c}" for c in r.unstable_cells
        ]
    return "\n".join(lines)
