"""Progress bars that show in the notebook, also for work that runs inside launched ranks.

A bar is tqdm.auto's in the notebook's own process. A rank or a sweep trial cannot draw one
(its output is a pipe, and a forked child must not talk to the kernel's widgets), so there
a bar is either silent or, on a launch's rank 0, a `RemoteBar` that sends its state to the
parent, which draws it (`ranks.rank_output`). A command the notebook runs (`sweep --json`,
a torchrun job) writes its bar as lines on stderr when its parent sets `LINES_VAR`
(`LineBar`), and the parent draws them (`Mirror.feed`). Bars appear by default only in a
notebook; scripts and tests stay quiet unless they ask.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable

DELAY = 1.0  # seconds before a bar appears: short runs (local SGD's rounds) show none
INTERVAL = 0.2  # seconds between two redraws at most
LINES_VAR = "COURSE_PROGRESS_LINES"  # set to "1" by a parent that draws this process's bars
PREFIX = "course_utils progress: "  # starts a line that carries a bar's state
BAR_KEY = "course_utils/progress"  # output metadata: the last line of a bar that was shown

_sink: Callable[[dict], None] | None = None  # set inside a rank: where rank 0's bar goes
_silent = False  # set inside a rank or a trial that must not draw


def send_to(sink: Callable[[dict], None] | None) -> None:
    """Inside a child: bars report to `sink`, or draw nothing at all when it is None."""
    global _sink, _silent
    _sink, _silent = sink, sink is None


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (where tqdm.auto draws a widget)."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def bar(total: int | None, desc: str, unit: str = "it", show: bool | None = None):
    """A bar for `total` steps: drawn here, sent to the parent, or a silent stand-in."""
    if _silent or show is False:
        return NullBar()
    if _sink is not None:
        return RemoteBar(_sink, total, desc, unit)
    if os.environ.get(LINES_VAR) == "1":
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


class RemoteBar(NullBar):
    """A bar whose changes go to the parent as small dicts, which it draws.

    Like tqdm's own `delay` and `mininterval`: nothing is sent in a run's first second, and
    then at most five states a second, so thousands of short runs cost the pipe nothing.
    """

    def __init__(self, sink, total, desc: str, unit: str):
        self.sink, self.state = sink, {"total": total, "desc": desc, "unit": unit, "n": 0}
        self.started, self.last_sent = time.monotonic(), None

    def update(self, n: int = 1) -> None:
        self.state["n"] += n
        now = time.monotonic()
        late_enough = now - self.started >= DELAY
        if late_enough and (self.last_sent is None or now - self.last_sent >= INTERVAL):
            self.sink(dict(self.state))
            self.last_sent = now

    def set_postfix(self, **values) -> None:
        self.state["postfix"] = {k: str(v) for k, v in values.items()}

    def close(self) -> None:
        if self.last_sent is not None:  # the parent drew it: tell it the run is over
            self.sink({**self.state, "closed": True})


class LineBar(RemoteBar):
    """A bar written as lines on stderr, for a parent that reads them (`Mirror.feed`).

    Its first state goes out at once, so the parent can draw the bar before the first step
    ends (a sweep's first trial takes many seconds); then one line per hundredth of the
    total, however fast or slow the steps come: a loop of thousands of steps writes about a
    hundred lines, and a sweep of six trials shows each one as it finishes.
    """

    def __init__(self, total, desc: str, unit: str):
        super().__init__(_write_line, total, desc, unit)
        self.every, self.sent_n = max(1, (total or 0) // 100), 0
        self.sink(dict(self.state))
        self.last_sent = self.started

    def update(self, n: int = 1) -> None:
        self.state["n"] += n
        if abs(self.state["n"] - self.sent_n) >= self.every:
            self.sink(dict(self.state))
            self.sent_n = self.state["n"]


def _write_line(state: dict) -> None:
    sys.stderr.write(PREFIX + json.dumps(state) + "\n")
    sys.stderr.flush()


class Mirror:
    """The parent's side of a `RemoteBar`: the tqdm bar it draws from the states it gets."""

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
