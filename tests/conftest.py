"""Shared fixtures: every test must leave no process of its own behind."""

from __future__ import annotations

import time

import psutil
import pytest


def _children() -> list[psutil.Process]:
    alive = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return alive


@pytest.fixture(autouse=True)
def no_leftover_processes():
    """Fail a test that leaves a rank (or any child) running; then clean up after it."""
    before = {p.pid for p in _children()}
    yield
    deadline = time.monotonic() + 5
    while True:
        extra = [p for p in _children() if p.pid not in before]
        if not extra or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for p in extra:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    assert not extra, f"processes left running: {[(p.pid, p.name()) for p in extra]}"
