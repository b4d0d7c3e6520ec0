"""A widget's figure is drawn once more after each change, so that the picture ipympl's
front end keeps for a saved notebook is the newest one, not the one before it."""

from __future__ import annotations

import asyncio
import types

from course_utils.core import widgets


class CountingCanvas:
    def __init__(self):
        self.draws = 0

    def draw_idle(self):
        self.draws += 1


def _figure():
    return types.SimpleNamespace(canvas=CountingCanvas())


def test_outside_a_kernel_a_figure_is_drawn_once():
    fig = _figure()
    widgets.draw(fig)
    assert fig.canvas.draws == 1


def test_in_the_kernel_s_loop_the_newest_change_is_drawn_again_once(monkeypatch):
    monkeypatch.setattr(widgets, "CATCH_UP_SECONDS", 0.05)
    fig = _figure()

    async def three_quick_changes():
        for _ in range(3):
            widgets.draw(fig)
        assert fig.canvas.draws == 3  # each change is drawn at once
        await asyncio.sleep(0.2)

    asyncio.run(three_quick_changes())
    assert fig.canvas.draws == 4  # and the last one once more: the earlier catch-ups cancelled
