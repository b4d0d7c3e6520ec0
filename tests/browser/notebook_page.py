"""One notebook open in JupyterLab, driven the way a learner drives it: the notebook's own
toolbar (Restart and Run All, Stop, Save, Run), the Kernel menu and the tab's close button.

Only the notebook in the visible panel is touched (`.jp-NotebookPanel:not(.lm-mod-hidden)`);
cells are addressed by their position, which is their index in the saved notebook.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from lab_server import LabServer
from playwright.sync_api import Page

PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
CELLS = f"{PANEL} .jp-Notebook .jp-Cell"
WIDGET_ERRORS = ("Error displaying widget", "model not found")  # ipywidgets' own words


def _button(command: str) -> str:
    return f'{PANEL} .jp-NotebookPanel-toolbar [data-command="{command}"]'


# The code cells of the open notebook whose model says they run or wait to run ([*]).
_RUNNING_CELLS = """() => {
    const cells = window.jupyterapp?.shell?.currentWidget?.content?.model?.cells;
    if (!cells) return null;
    const running = [];
    for (let i = 0; i < cells.length; i++) {
        if (cells.get(i).executionState === "running") running.push(i);
    }
    return running;
}"""


# Whether Run All got to its end (null where the app is not exposed).
_RUN_ALL_ENDED = """() => {
    const cells = window.jupyterapp?.shell?.currentWidget?.content?.model?.cells;
    if (!cells) return null;
    let last = null;
    for (let i = 0; i < cells.length; i++) {
        const cell = cells.get(i);
        if (cell.type !== "code") continue;
        last = cell;
        const tags = cell.getMetadata("tags") || [];
        for (let j = 0; j < cell.outputs.length; j++) {
            const failed = cell.outputs.get(j).type === "error";
            if (failed && !tags.includes("raises-exception")) return true;
        }
    }
    return last === null || last.executionCount !== null;
}"""


class NotebookPage:
    def __init__(self, page: Page, lab: LabServer, name: str):
        self.page, self.lab, self.name = page, lab, name

    def open(self, timeout: float = 120) -> None:
        """Load JupyterLab on this notebook alone (a fresh page, the workspace reset: no tab
        left from before) and wait for its cells and its kernel."""
        self.page.goto(f"{self.lab.url}/lab/tree/{self.name}?reset&token={self.lab.token}")
        self.page.wait_for_selector(CELLS, timeout=timeout * 1000)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            kernel = self.lab.kernel_id(self.name)
            if kernel and self.lab.kernel_state(kernel) == "idle":
                return
            time.sleep(0.5)
        raise TimeoutError(f"{self.name}: its kernel was not idle {timeout:.0f} s after opening")

    def accept_dialog(self, wait: float = 10) -> str:
        """Press a dialog's main button (Restart, Shut Down, ...); returns its label."""
        button = self.page.locator(".jp-Dialog .jp-mod-accept")
        button.wait_for(timeout=wait * 1000)
        label = button.inner_text()
        button.click()
        self.page.locator(".jp-Dialog").wait_for(state="detached", timeout=wait * 1000)
        return label

    def dismiss_dialogs(self, shots: Path) -> list[str]:
        """Any dialog still open (a kernel that died says so in one): a screenshot of it, its
        text, and its main button pressed."""
        texts = []
        dialog = self.page.locator(".jp-Dialog")
        while dialog.count():
            path = shots / f"dialog_{len(texts)}.png"
            self.page.screenshot(path=str(path))
            texts.append(f"{dialog.first.inner_text()[:200]!r} ({path})")
            self.accept_dialog()
        return texts

    def busy_cells(self) -> list[int]:
        """Positions of cells running or waiting to run, read from the notebook's model: the
        page holds only the cells near the view (JupyterLab renders a long notebook in
        windows), so the [*] of a cell far below is not in it. The prompts in the page are
        the fallback where the app is not exposed."""
        running = self.page.evaluate(_RUNNING_CELLS)
        if running is not None:
            return running
        prompts = self.page.eval_on_selector_all(
            CELLS,
            "cells => cells.map(c => (c.querySelector('.jp-InputPrompt') || {}).textContent || '')",
        )
        return [i for i, text in enumerate(prompts) if "*" in text]

    def restart_and_run_all(self) -> None:
        self.page.click(_button("notebook:restart-run-all"))
        self.accept_dialog()

    def wait_until_done(
        self, timeout: float, every: Callable[[], None] = lambda: None, run_all: bool = False
    ) -> bool:
        """Wait until no cell shows [*] and the kernel is idle on two polls in a row (not
        just between two cells), calling `every` about twice a second; False at the timeout.
        The first 5 s count only once a cell showed [*]: a restart takes a moment.

        With `run_all`, also until Run All reached its end: the last code cell ran, or a
        cell not tagged raises-exception failed. After a tagged cell's error JupyterLab
        shows the queued cells as idle while the kernel still runs them, and the kernel's
        state read idle while 00's cell 24 ran, once it showed its bar: the check took Run
        All for finished there and pressed Stop into that cell."""
        kernel = self.lab.kernel_id(self.name)
        deadline, grace = time.monotonic() + timeout, time.monotonic() + 5
        seen_busy, quiet = False, 0
        while time.monotonic() < deadline:
            every()
            busy = self.busy_cells()
            seen_busy = seen_busy or bool(busy) or time.monotonic() > grace
            idle = not busy and kernel and self.lab.kernel_state(kernel) == "idle"
            idle = idle and (not run_all or self.page.evaluate(_RUN_ALL_ENDED) is not False)
            quiet = quiet + 1 if seen_busy and idle else 0
            if quiet >= 2:
                return True
            time.sleep(0.5)
        return False

    def save(self, timeout: float = 30) -> None:
        """Save from the toolbar and wait until the server has the new file."""
        before = self.lab.get(f"/api/contents/{self.name}?content=0")["last_modified"]
        self.page.click(_button("docmanager:save"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = self.lab.get(f"/api/contents/{self.name}?content=0")["last_modified"]
            if now != before:
                return
            time.sleep(0.3)
        raise TimeoutError(f"{self.name}: saving did not reach the server in {timeout:.0f} s")

    def cell(self, index: int):
        return self.page.locator(CELLS).nth(index)

    def run_cell(self, index: int) -> None:
        """Select cell `index` (a click on its prompt: command mode) and press Run."""
        prompt = self.cell(index).locator(".jp-InputPrompt").first
        prompt.scroll_into_view_if_needed()
        prompt.click()
        self.page.click(_button("notebook:run-cell-and-select-next"))

    def stop(self) -> None:
        """The toolbar's Stop button: interrupt the kernel."""
        self.page.click(_button("notebook:interrupt-kernel"))

    def shut_down_kernel_and_close(self) -> bool:
        """Kernel menu > Shut Down Kernel, then the tab's close button. True when closing
        asked to save changes (answered Discard: the file stays as it was saved)."""
        self.page.click(".lm-MenuBar-item:has-text('Kernel')")
        self.page.click('.lm-Menu-item[data-command="kernelmenu:shutdown"]')
        try:
            self.accept_dialog(wait=3)
        except Exception:  # noqa: BLE001 - this JupyterLab asks no confirmation
            pass
        kernel = self.lab.kernel_id(self.name)
        deadline = time.monotonic() + 30
        while kernel and time.monotonic() < deadline:
            time.sleep(0.3)
            kernel = self.lab.kernel_id(self.name)
        tab = self.page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-current")
        tab.locator(".lm-TabBar-tabCloseIcon").click()
        asked = False
        discard = self.page.locator(".jp-Dialog button:has-text('Discard')")
        try:
            discard.wait_for(timeout=2000)
            discard.click()
            asked = True
        except Exception:  # noqa: BLE001 - no question: the notebook was not modified
            pass
        self.page.locator(PANEL).wait_for(state="detached", timeout=30_000)
        return asked

    def widget_states(self, expected: dict[int, list[int]]) -> dict[tuple[int, int], str]:
        """For each (cell, output position) expected to hold a widget: "drawn", "error"
        (the output says so) or "empty" (not rendered yet, or never)."""
        return {
            (cell, position): state
            for cell, positions in expected.items()
            for position, state in zip(positions, self._output_states(cell, positions), strict=True)
        }

    def _output_states(self, cell: int, positions: list[int]) -> list[str]:
        return self.cell(cell).evaluate(
            """(cell, [positions, marks]) => {
                const area = cell.querySelector('.jp-Cell-outputArea');  // not a nested one
                const outs = area ? [...area.children].map(child => [...child.children]
                    .find(e => e.classList.contains('jp-OutputArea-output'))) : [];
                return positions.map(p => {
                    const out = outs[p];
                    if (!out) return 'empty';
                    if (marks.some(m => out.textContent.includes(m))) return 'error';
                    return out.querySelector('.jupyter-widgets, .jupyter-matplotlib')
                        ? 'drawn' : 'empty';
                });
            }""",
            [positions, list(WIDGET_ERRORS)],
        )

    def wait_for_widgets(self, expected: dict[int, list[int]], timeout: float = 60):
        """Wait until every expected widget output is drawn or shows an error (a widget is
        drawn only once the widget manager has its state: from the kernel, or from the
        notebook's metadata after a reopen); returns the last states."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.widget_states(expected)
            if "empty" not in states.values() or time.monotonic() > deadline:
                return states
            time.sleep(0.5)

    def screenshot(self, path: Path, at=None) -> None:
        """The window, scrolled to `at` (a locator) when given."""
        if at is not None:
            self._settle_on(at)
        self.page.screenshot(path=str(path))

    def shoot(self, element, path: Path) -> None:
        """A picture of one element (a cell, an output)."""
        self._settle_on(element)
        element.screenshot(path=str(path))

    def _settle_on(self, element) -> None:
        """Scroll to `element` until it stays put: off-screen cells are laid out only as
        they come into view (content-visibility), which moves what was scrolled to."""
        for _ in range(5):
            element.scroll_into_view_if_needed()
            before = element.bounding_box()
            time.sleep(0.3)
            if element.bounding_box() == before:
                return
