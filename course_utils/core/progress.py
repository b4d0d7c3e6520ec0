"""Progress bars that show in the notebook, also for work that runs in other processes.

A bar is tqdm.auto's in the notebook's own process. A launched rank, a sweep trial or a
command the notebook runs (`sweep --json`, a torchrun job) cannot draw one (its output is a
pipe, and a forked child must not talk to the kernel's widgets). There a bar is silent or,
where the parent draws it (a launch's rank 0; a command whose parent sets `LINES_VAR`), a
`LineBar`: its states go out as lines on stderr, and the parent draws them (`Mirror.feed`).
One way through, whoever runs the work. Bars appear by default only in a notebook; scripts
and tests stay quiet unless they ask.
"""

from __future__ import annotations

import json
import os
import sys
import time

DELAY = 1.0  # seconds before a bar appears: short runs (local SGD's rounds) show none
INTERVAL = 0.2  # seconds between two redraws at most
LINES_VAR = "COURSE_PROGRESS_LINES"  # set to "1" by a parent that draws this process's bars
PREFIX = "course_utils progress: "  # starts a line that carries a bar's state
BAR_KEY = "course_utils/progress"  # output metadata: the last line of a bar that was shown

_silent = False  # set inside a rank or a trial that must not draw
_as_lines = False  # set inside a launch's rank 0, whose stderr its parent reads


def silence() -> None:
    """Inside a child: its bars draw nothing."""
    global _silent
    _silent = True


def send_as_lines() -> None:
    """Inside a child whose parent reads its stderr and draws what it sends (`LineBar`)."""
    global _silent, _as_lines
    _silent, _as_lines = False, True


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (where tqdm.auto draws a widget)."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def bar(total: int | None, desc: str, unit: str = "it", show: bool | None = None):
    """A bar for `total` steps: drawn here, sent to the parent, or a silent stand-in."""
    if _silent or show is False:
        return NullBar()
    if _as_lines or os.environ.get(LINES_VAR) == "1":
        return LineBar(total, desc, unit)
    if show is None and not in_notebook():
        return NullBar()
    options = dict(
        total=total, desc=desc, unit=unit, leave=False, delay=DELAY, mininterval=INTERVAL
    )
    if in_notebook():
        return _notebook_bar_class()(**options)
    from tqdm.auto import tqdm

    return tqdm(**options)


def _notebook_bar_class():
    """tqdm's notebook bar, whose output turns into plain text when it closes.

    A closed tqdm widget leaves its output behind; once the notebook is saved and opened
    with a new kernel, JupyterLab shows "Error displaying widget: model not found" there.
    So the bar is displayed with a display id, and on closing that output is replaced: by
    nothing visible when the work finished (the bar's last line is kept in the output's
    metadata, where `course run` sees that a bar was shown), by the bar's last line when
    it stopped early, so the learner sees where."""
    from IPython.display import display
    from tqdm.notebook import tqdm as tqdm_notebook

    class NotebookBar(tqdm_notebook):
        handle = None

        def display(self, msg=None, pos=None, close=False, bar_style=None, check_delay=True):
            due = check_delay and self.delay > 0 and not self.displayed and not close
            super().display(msg, pos, close, bar_style, check_delay=False)
            if due:
                self.handle, self.displayed = display(self.container, display_id=True), True

        def close(self):
            finished = not (self.total and self.n < self.total)
            last = str(self)
            super().close()
            if self.handle is not None:
                shown = "" if finished else last
                self.handle.update({"text/plain": shown}, metadata={BAR_KEY: last}, raw=True)
                self.handle = None

    return NotebookBar


class NullBar:
    """Takes every call a tqdm bar takes, and shows nothing; like tqdm's, it closes at the end
    of a `with` block, however the block ends."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, **values) -> None:
        pass

    def close(self) -> None:
        pass


class LineBar(NullBar):
    """A bar written as lines on stderr, for a parent that reads them (`Mirror.feed`).

    Like tqdm's own `delay` and `mininterval`: nothing goes out in a bar's first `DELAY`,
    then at most one state every `INTERVAL`, and a bar that sent nothing closes without a
    word. So the hundreds of short launches of local SGD's rounds never reach the kernel
    (a notebook bar made and taken away for each flooded nbval with display updates), a
    loop of thousands of quick steps writes a few lines a second, and a sweep shows each
    trial as it finishes.
    """

    def __init__(self, total, desc: str, unit: str):
        self.state = {"total": total, "desc": desc, "unit": unit, "n": 0}
        self.started, self.last_sent = time.monotonic(), None

    def update(self, n: int = 1) -> None:
        self.state["n"] += n
        now = time.monotonic()
        late_enough = now - self.started >= DELAY
        if late_enough and (self.last_sent is None or now - self.last_sent >= INTERVAL):
            _write_line(self.state)
            self.last_sent = now

    def set_postfix(self, **values) -> None:
        self.state["postfix"] = {k: str(v) for k, v in values.items()}

    def close(self) -> None:
        if self.last_sent is not None:  # the parent drew it: tell it the run is over
            _write_line({**self.state, "closed": True})


def _write_line(state: dict) -> None:
    sys.stderr.write(PREFIX + json.dumps(state) + "\n")
    sys.stderr.flush()


class Mirror:
    """The parent's side of a `LineBar`: the tqdm bar it draws from the states it reads."""

    def __init__(self, show: bool | None = None):
        self.show, self.drawn = show, None

    def __call__(self, state: dict) -> None:
        if self.drawn is None:
            self.drawn = bar(state["total"], state["desc"], state["unit"], show=self.show)
        self.drawn.update(state["n"] - getattr(self.drawn, "n", state["n"]))
        if state.get("postfix"):
            self.drawn.set_postfix(**state["postfix"])
        if state.get("closed"):
            self.close()

    def feed(self, line: str) -> bool:
        """One line of a child's output: drawn if it carries a bar's state (`LineBar`), which
        may share its line with other text; False for any other line, for the caller to keep."""
        if PREFIX not in line:
            return False
        try:
            state = json.loads(line.split(PREFIX, 1)[1])
        except json.JSONDecodeError:  # cut short: the next state says as much
            return True
        self(state)
        return True

    def close(self) -> None:
        if self.drawn is not None:
            self.drawn.close()
            self.drawn = None
