"""Stand-ins for progress bars, for tests that a long loop shows how far it got.

`record_bars` replaces `progress.bar` in this process: every bar opened here is kept with its
total, how far it went and whether it was closed. `record_rank_bars` records what rank 0 of a
launch sends to this process, with no delay and no throttle, so a quick run still sends it all.
"""

from __future__ import annotations

from course_utils.core import progress


class RecordedBar(progress.NullBar):
    def __init__(self, total, desc: str, unit: str):
        self.total, self.desc, self.unit = total, desc, unit
        self.n, self.closed, self.postfixes = 0, False, []

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix(self, **values) -> None:
        self.postfixes.append(values)

    def close(self) -> None:
        self.closed = True


def record_bars(monkeypatch) -> list[RecordedBar]:
    """The bars opened in this process from now on, in the order they were opened."""
    bars: list[RecordedBar] = []

    def opened(total, desc, unit="it", show=None):
        if show is False:
            return progress.NullBar()
        bars.append(RecordedBar(total, desc, unit))
        return bars[-1]

    monkeypatch.setattr(progress, "bar", opened)
    return bars


def record_rank_bars(monkeypatch) -> list[dict]:
    """Every state rank 0's bars send to this process (forked ranks inherit the settings)."""
    states: list[dict] = []
    monkeypatch.setattr(progress, "DELAY", 0.0)
    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    monkeypatch.setattr(progress.Mirror, "__call__", lambda self, state: states.append(state))
    return states


def last_states(states: list[dict]) -> dict[str, dict]:
    """Each bar's last state, by its description."""
    return {s["desc"]: s for s in states}
