"""`run --json` reports each notebook's peak memory: the kernel and its ranks, as PSS."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import nbformat

from course_utils.course import runner as notebooks
from course_utils.course.memory import PeakMemory, tree_pss


def test_the_tree_counts_children_once_each():
    alone = tree_pss(os.getpid())
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; x = bytearray(64 * 2**20); time.sleep(5)"]
    )
    try:
        deadline = time.monotonic() + 5
        while tree_pss(os.getpid()) < alone + 48 * 2**20 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert tree_pss(os.getpid()) >= alone + 48 * 2**20
    finally:
        child.kill()
        child.wait()
    assert tree_pss(2**22 + 12345) == 0  # no such process


def test_the_peak_is_sampled_while_the_block_runs():
    with PeakMemory(os.getpid, interval=0.05) as peak:
        time.sleep(0.3)
    assert peak.bytes > 0 and peak.mib > 1


def test_sampling_takes_a_small_share_of_a_core(monkeypatch):
    """A sample that costs 20 ms of CPU is taken at most every 0.4 s, not every 10 ms."""
    from course_utils.course import memory

    calls = []

    def costly(pid):
        calls.append(pid)
        end = time.thread_time() + 0.02
        while time.thread_time() < end:
            pass
        return 1

    monkeypatch.setattr(memory, "tree_pss", costly)
    with PeakMemory(os.getpid, interval=0.01):
        time.sleep(1.0)
    assert 1 <= len(calls) <= 6  # unbounded: about 33 (10 ms waits, 20 ms samples)


def test_a_notebook_report_carries_its_peak(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import time; block = bytearray(32 * 2**20); time.sleep(1)")
    ]
    path = tmp_path / "01_memory.ipynb"
    nbformat.write(nb, path)
    report = notebooks.execute(path)
    assert report.error is None
    assert report.peak_pss_mib is not None and report.peak_pss_mib > 32
    assert report.as_dict()["peak_pss_mib"] == report.peak_pss_mib
