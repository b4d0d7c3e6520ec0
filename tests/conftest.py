"""Shared fixtures: every test must leave no process and no rendezvous folder of its own behind."""

from __future__ import annotations

import os
import tempfile
import time

import psutil
import pytest
from jupyter_kernel import kernel  # noqa: F401  (a fixture: the interrupt tests' kernel)

from course_utils.ranks import limits
from course_utils.ranks.launch import live_children


def own_rendezvous_folders() -> set[str]:
    """The rendezvous folders that launches of this process made and have not removed."""
    mine = f"{limits.RENDEZVOUS_PREFIX}{os.getpid()}-"
    return {e.name for e in os.scandir(tempfile.gettempdir()) if e.name.startswith(mine)}


@pytest.fixture(autouse=True)
def no_leftover_processes():
    """Fail a test that leaves a rank (or any child) running; then clean up after it."""
    before, folders_before = set(live_children()), own_rendezvous_folders()
    yield
    left_folders = own_rendezvous_folders() - folders_before
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
    assert not left_folders, f"rendezvous folders left behind: {sorted(left_folders)}"
