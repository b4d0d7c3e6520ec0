"""Shared fixtures: every test must leave no process of its own behind."""

from __future__ import annotations

import time

import psutil
import pytest

from course_utils.ranks.launch import live_children


@pytest.fixture(autouse=True)
def no_leftover_processes():
    """Fail a test that leaves a rank (or any child) running; then clean up after it."""
    before = set(live_children())
    yield
    deadline = time.monotonic() + 5
    while True:
        extra = [pid for pid in live_children() if pid not in before]
        if not extra or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    names = []
    for pid in extra:
        try:
            process = psutil.Process(pid)
            names.append((pid, " ".join(process.cmdline())[:80]))
            process.kill()
        except psutil.NoSuchProcess:
            pass
    assert not extra, f"processes left running: {names}"
