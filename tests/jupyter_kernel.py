"""A real Jupyter kernel for tests that interrupt a cell, as a notebook's Stop button does.

The interrupt tests of ranks/ and of 09's elastic cell run code in the same kind of
kernel a learner's notebook runs in, interrupt it, and then look for what it left behind.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]


def run(kc, code: str, timeout: float) -> dict:
    """Execute `code`; return the reply's content with the error text shown, if any."""
    msg_id = kc.execute(code)
    return wait_for_reply(kc, msg_id, timeout)


def wait_for_reply(kc, msg_id: str, timeout: float) -> dict:
    """The content of the kernel's reply to `msg_id`, waiting up to `timeout` seconds."""
    answer = None
    deadline = time.monotonic() + timeout
    while answer is None:
        left = deadline - time.monotonic()
        assert left > 0, "the kernel did not answer in time"
        msg = kc.get_shell_msg(timeout=left)
        if msg["parent_header"].get("msg_id") == msg_id:
            answer = msg["content"]
    return answer


def leftovers(pid: int) -> list[str]:
    """The kernel's live descendants but the resource tracker and the forkserver's server
    (reused by the next launch, it ends with the kernel): 'pid cmdline' each. A rank the
    server forked is a grandchild, and counts."""
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                cmd = " ".join(child.cmdline())
                server = "multiprocessing.forkserver" in cmd and child.ppid() == pid
                if "resource_tracker" not in cmd and not server:
                    found.append(f"{child.pid} {cmd[:60]}")
        except psutil.NoSuchProcess:
            pass
    return found


@pytest.fixture
def kernel():
    """(kernel manager, client) of a fresh python3 kernel that imports this checkout."""
    jupyter_client = pytest.importorskip("jupyter_client")
    pytest.importorskip("ipykernel")
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3", env=env, cwd=str(REPO))
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
