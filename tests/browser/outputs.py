"""What a notebook saved by the browser says about its run: error outputs, ✗ verdicts, and
how long each cell ran (JupyterLab's `recordTiming`), from which the Stop check's cell is
chosen.

Expected failures do not count: a cell tagged `raises-exception` is meant to raise (Run All
goes on past it), and an exercise cell (`# your code here`) prints `✗ not solved yet` until
the learner solves it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

EXERCISE_MARK = "# your code here"
NOT_SOLVED = "not solved yet"
FAIL = "✗"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return source if isinstance(source, str) else "".join(source)


def _tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _texts(output: dict) -> list[str]:
    """The text a learner reads in one output: a stream, or a result's plain text."""
    if output.get("output_type") == "stream":
        text = output.get("text", "")
        return [text if isinstance(text, str) else "".join(text)]
    plain = output.get("data", {}).get("text/plain", "")
    return [plain if isinstance(plain, str) else "".join(plain)] if plain else []


def code_cells(notebook: dict) -> list[tuple[int, dict]]:
    """(index among all cells, cell) of every code cell; the index is the cell's position in
    the notebook, as the browser shows it."""
    return [(i, c) for i, c in enumerate(notebook["cells"]) if c["cell_type"] == "code"]


def error_cells(notebook: dict) -> list[tuple[int, str]]:
    """(cell index, `ename: evalue`) of each error output outside cells meant to raise."""
    found = []
    for index, cell in code_cells(notebook):
        if "raises-exception" in _tags(cell):
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                found.append((index, f"{output.get('ename')}: {output.get('evalue')}"[:160]))
    return found


def cross_lines(notebook: dict) -> list[tuple[int, str]]:
    """(cell index, line) of each ✗ verdict outside exercise cells."""
    found = []
    for index, cell in code_cells(notebook):
        if EXERCISE_MARK in _source(cell):
            continue
        for output in cell.get("outputs", []):
            for text in _texts(output):
                for line in text.splitlines():
                    line = line.strip()
                    if line.startswith(FAIL) and NOT_SOLVED not in line:
                        found.append((index, line[:160]))
    return found


def widget_outputs(notebook: dict) -> dict[int, list[int]]:
    """Cell index -> positions of its outputs that display a widget (ipywidgets, ipympl)."""
    found: dict[int, list[int]] = {}
    for index, cell in code_cells(notebook):
        for position, output in enumerate(cell.get("outputs", [])):
            if WIDGET_VIEW in output.get("data", {}):
                found.setdefault(index, []).append(position)
    return found


def unexecuted_cells(notebook: dict) -> list[int]:
    """Code cells Run All never reached (it stops at an unexpected error)."""
    return [i for i, c in code_cells(notebook) if _source(c).strip() and not c["execution_count"]]


@dataclass
class CellSpan:
    """When one cell ran, by the kernel's clock (seconds since the epoch)."""

    index: int
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def _moment(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def cell_spans(notebook: dict) -> list[CellSpan]:
    """Each executed code cell's span, from the timing JupyterLab recorded in its metadata."""
    spans = []
    for index, cell in code_cells(notebook):
        timing = cell.get("metadata", {}).get("execution", {})
        start = timing.get("iopub.execute_input") or timing.get("iopub.status.busy")
        end = timing.get("shell.execute_reply") or timing.get("iopub.status.idle")
        if start and end:
            spans.append(CellSpan(index, _moment(start), _moment(end)))
    return spans


def longest_rank_cell(spans: list[CellSpan], rank_moments: list[float]) -> tuple[int, bool]:
    """The longest cell during which the kernel was seen with ranks running, and True; or,
    when no cell was, the longest cell and False. Raises ValueError without any span."""
    if not spans:
        raise ValueError("the saved notebook has no cell timings (recordTiming is off?)")
    with_ranks = [s for s in spans if any(s.start <= t <= s.end for t in rank_moments)]
    pool = with_ranks or spans
    return max(pool, key=lambda s: s.seconds).index, bool(with_ranks)
