"""Which processes a notebook's kernel has started, and which are left after a Stop.

A rank forked from the kernel carries the kernel's command line (with its connection file,
`kernel-<id>.json`); a `torchrun` node or a spawned rank carries the lab's marker variable
instead. Either way it is found, also when it was orphaned and is no longer a descendant.
"""

from __future__ import annotations

import psutil
from lab_server import MARKER


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def kernel_process(kernel_id: str, server_pid: int) -> psutil.Process | None:
    """The kernel itself: the lab server's child whose command line names its connection
    file (a rank forked from it names the same file, under another parent)."""
    mark = f"kernel-{kernel_id}.json"
    for process in psutil.process_iter(["cmdline", "ppid"]):
        if process.info["ppid"] == server_pid and mark in " ".join(process.info["cmdline"] or []):
            return process if _alive(process) else None
    return None


def rank_count(kernel: psutil.Process | None) -> int:
    """How many processes the kernel has running below it now (ranks, torchrun agents)."""
    if kernel is None:
        return 0
    try:
        return sum(_alive(child) for child in kernel.children(recursive=True))
    except psutil.NoSuchProcess:
        return 0


def _environment_marker(process: psutil.Process) -> str | None:
    try:
        return process.environ().get(MARKER)
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
        return None


def leftovers(kernel_id: str, marker: str, spared: set[int], server_pid: int):
    """Live processes of this lab that are neither the kernel nor in `spared` (make, the lab
    server): the kernel's descendants, and any process with its connection file or the
    lab's marker in its command line or environment."""
    kernel = kernel_process(kernel_id, server_pid)
    spared = spared | ({kernel.pid} if kernel else set())
    found: dict[int, psutil.Process] = {}
    if kernel is not None:
        try:
            found.update({c.pid: c for c in kernel.children(recursive=True)})
        except psutil.NoSuchProcess:
            pass
    mark = f"kernel-{kernel_id}.json"
    for process in psutil.process_iter(["cmdline"]):
        if process.pid in spared:
            continue
        named = mark in " ".join(process.info["cmdline"] or [])
        if named or _environment_marker(process) == marker:
            found[process.pid] = process
    return [p for pid, p in sorted(found.items()) if pid not in spared and _alive(p)]


def describe(processes: list[psutil.Process]) -> str:
    """One line per process: pid, parent and the start of its command line."""
    lines = []
    for process in processes:
        try:
            command = " ".join(process.cmdline())[:120]
            lines.append(f"    pid {process.pid} (parent {process.ppid()}): {command}")
        except psutil.NoSuchProcess:
            lines.append(f"    pid {process.pid}: exited while being listed")
    return "\n".join(lines)
