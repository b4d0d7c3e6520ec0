"""Every widget redraws after one control change: for each cell whose output holds a widget,
move one control as a learner would (a slider's handle: focus it and press an arrow key;
else the next choice of a dropdown; else a checkbox) and wait for its picture (the ipympl
canvas) or its text outputs to change.

A widget whose picture stays the same is one whose kernel side no longer answers: the
symptom a learner sees as "the sliders do nothing".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from notebook_page import NotebookPage

SLIDER, DROPDOWN = ".jupyter-widgets .noUi-handle", ".jupyter-widgets select"
CHECKBOX = ".jupyter-widgets input[type=checkbox]"

# What the widget shows, without its controls: the canvases' pixels and the text of outputs.
PICTURE_JS = """area => [
    ...[...area.querySelectorAll('.jupyter-matplotlib-canvas-div canvas')].map(c => c.toDataURL()),
    ...[...area.querySelectorAll('.widget-output, .widget-html, .widget-htmlmath')]
        .map(e => e.textContent),
].join('|')"""


@dataclass
class Redraw:
    cell: int
    what: str  # the control changed, or why none was
    redrawn: bool | None  # None: nothing to change


def change_one_control(area) -> str | None:
    """Move the first slider one step (back from its maximum), or pick a dropdown's next
    choice, or toggle a checkbox; returns what was changed, None if there is no control."""
    handles = area.locator(SLIDER)
    if handles.count():
        handle = handles.first
        at_max = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
        key = "ArrowLeft" if at_max else "ArrowRight"
        handle.scroll_into_view_if_needed()
        handle.focus()
        handle.press(key)
        label = area.locator(".widget-slider .widget-label").first.text_content() or ""
        return f"{key} on slider '{label.strip()}'"
    selects = area.locator(DROPDOWN)
    if selects.count():
        select = selects.first
        options = select.locator("option")
        index = select.evaluate("s => s.selectedIndex")
        choice = options.nth((index + 1) % options.count()).get_attribute("value")
        select.scroll_into_view_if_needed()
        select.select_option(choice)
        return f"dropdown choice '{choice}'"
    boxes = area.locator(CHECKBOX)
    if boxes.count():
        boxes.first.scroll_into_view_if_needed()
        boxes.first.click()
        return "a checkbox click"
    return None


def check_redraws(
    notebook: NotebookPage, expected: dict[int, list[int]], shots: Path, timeout: float = 30
) -> list[Redraw]:
    """Change one control of each widget cell in `expected` (cell -> widget outputs, from
    the saved notebook); a screenshot of each after its change. A widget that shows an
    error, or never rendered, cannot redraw."""
    states = notebook.wait_for_widgets(expected)
    results = []
    for index in expected:
        broken = [s for (cell, _), s in states.items() if cell == index and s != "drawn"]
        if broken:
            results.append(Redraw(index, f"nothing: the widget shows {broken[0]}", False))
            continue
        area = notebook.cell(index).locator(".jp-Cell-outputArea").first
        before = area.evaluate(PICTURE_JS)
        control = change_one_control(area)
        if control is None:
            results.append(Redraw(index, "nothing: it has no control", None))
            continue
        deadline, redrawn = time.monotonic() + timeout, False
        while time.monotonic() < deadline and not redrawn:
            time.sleep(0.5)
            redrawn = area.evaluate(PICTURE_JS) != before
        notebook.shoot(area, shots / f"widget_cell{index}_after_change.png")
        results.append(Redraw(index, control, redrawn))
    return results
