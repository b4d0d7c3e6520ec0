"""Shared fixtures: every test must leave no process and no rendezvous folder of its own behind.
The longest test files run first (`pytest_collection_modifyitems`)."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

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


FILE_SECONDS = Path(__file__).with_name("file_seconds.json")
_seconds_here: dict[str, float] = defaultdict(float)


def pytest_collection_modifyitems(items):
    """The longest test files first, by `file_seconds.json`; a file not in it runs last.

    `make unit` hands whole files to its workers (`--dist loadfile --no-loadscope-reorder`),
    a new one to a worker that is nearly done. In xdist's own order (most tests first) the
    one-test files come last: the 36-s `test_elastic_stop.py` started near the end on one of
    three workers, which had 318 s of tests against the others' 287 and 290 s, and the stage
    took 334 s; longest first, the three had 300 s each and it took 315 s (2026-11-30).
    Refresh the file with `COURSE_FILE_SECONDS=1 make unit`.
    """
    seconds = json.loads(FILE_SECONDS.read_text())
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::")[0], 0.0))


def pytest_runtest_logreport(report):
    _seconds_here[report.nodeid.split("::")[0]] += report.duration


def pytest_sessionfinish(session):
    """With COURSE_FILE_SECONDS set, write each file's seconds (setup, call and teardown of
    its tests) to `file_seconds.json`: in the controller, which gets every worker's reports.
    The files this run did not reach keep their seconds, so a partial run loses none."""
    if os.environ.get("COURSE_FILE_SECONDS") and not hasattr(session.config, "workerinput"):
        seconds = {**json.loads(FILE_SECONDS.read_text()), **_seconds_here}
        ordered = sorted(seconds.items(), key=lambda kv: -kv[1])
        rounded = {path: round(seconds, 1) for path, seconds in ordered}
        FILE_SECONDS.write_text(json.dumps(rounded, indent=1) + "\n")
