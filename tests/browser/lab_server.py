"""JupyterLab started the way a learner starts it (`make lab`), serving a scratch copy of the
notebooks, and the few REST calls the browser test needs beside the browser.

The committed notebooks are never opened: Run All and the saves it triggers write only the
copy. The lab runs with its own (empty) user settings and workspaces, so a developer's own
JupyterLab layout cannot change what the test sees; the only setting added is timing per
cell, which the Stop check reads to find the longest cell.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

# Every process started under the lab inherits this variable: how leftovers are told apart
# from another checkout's notebooks running on the same machine.
MARKER = "COURSE_BROWSER_TEST_RUN"

USER_SETTINGS = {
    # per-cell start and end in the saved notebook: the Stop check picks its cell from them
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"recordTiming": True},
    # no "get the Jupyter news?" toast over the screenshots, and no request to the internet
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def free_port() -> int:
    """A port the OS says is free now; the lab is told not to retry another one."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_notebooks(source: Path, scratch: Path) -> Path:
    """A fresh copy of the whole notebooks/ tree (images, configs and solutions that the
    notebooks read relative to their folder come along)."""
    target = scratch / "notebooks"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return target


def write_user_settings(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    for name, values in USER_SETTINGS.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values, indent=2))


class LabServer:
    """`make lab` on a free port with a fresh token, stopped with every kernel it started."""

    def __init__(self, repo: Path, scratch: Path):
        self.repo, self.scratch = repo, scratch
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.marker = secrets.token_hex(8)
        self.root = copy_notebooks(repo / "notebooks", scratch)
        self.log_path = scratch / "lab.log"
        self.make: subprocess.Popen | None = None
        self.server_pid = 0  # the `jupyter lab` process under make: every kernel's parent

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120) -> None:
        write_user_settings(self.scratch / "lab-user-settings")
        workspaces = self.scratch / "lab-workspaces"
        shutil.rmtree(workspaces, ignore_errors=True)
        env = {
            **os.environ,
            MARKER: self.marker,
            "JUPYTERLAB_SETTINGS_DIR": str(self.scratch / "lab-user-settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(workspaces),
        }
        env.setdefault("COURSE_PROFILE", "cpu")  # as `make notebooks` runs them
        lab_args = (
            f"--no-browser --ip=127.0.0.1 --port={self.port} --ServerApp.port_retries=0 "
            f"--IdentityProvider.token={self.token} --LabApp.news_url=None "
            "--LabApp.expose_app_in_browser=True"  # window.jupyterapp: the notebook's model
        )
        command = ["make", "--no-print-directory", "lab", f"NOTEBOOK_DIR={self.root}"]
        self._log = self.log_path.open("w")
        self.make = subprocess.Popen(
            [*command, f"LAB_ARGS={lab_args}"],
            cwd=self.repo,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # one process group: nothing of it outlives stop()
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.make.poll() is not None:
                raise RuntimeError(
                    f"`make lab` exited with {self.make.returncode}; its log ({self.log_path}):\n"
                    + self.log_path.read_text()[-3000:]
                )
            try:
                self.get("/api/status")
                self.server_pid = self._server_pid()
                return
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        raise RuntimeError(f"JupyterLab did not answer on {self.url} in {timeout:.0f} s")

    def request(self, method: str, path: str, timeout: float = 30):
        request = urllib.request.Request(
            self.url + path, method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body = answer.read()
        return json.loads(body) if body else None

    def get(self, path: str):
        return self.request("GET", path)

    def kernel_id(self, notebook: str) -> str | None:
        """The kernel of `notebook`'s session, if it has one."""
        for session in self.get("/api/sessions"):
            if session.get("path") == notebook and session.get("kernel"):
                return session["kernel"]["id"]
        return None

    def kernel_state(self, kernel_id: str) -> str:
        try:
            return self.get(f"/api/kernels/{kernel_id}")["execution_state"]
        except urllib.error.HTTPError:
            return "gone"

    def saved_notebook(self, notebook: str) -> dict:
        """The notebook as the browser last saved it, read from the disk. Not through the
        server: a read that meets an autosave half written makes jupyter_server restore its
        backup, racing the writer (11 on 2026-11-30: a 500, and the notebook renamed to
        .invalid; jupyterlab issue #17365). Half written, the file is read again."""
        for attempt in range(10):
            try:
                return json.loads((self.root / notebook).read_text())
            except (json.JSONDecodeError, FileNotFoundError):
                if attempt == 9:
                    raise
                time.sleep(0.5)

    def shut_down_kernels(self) -> None:
        for kernel in self.get("/api/kernels"):
            try:
                self.request("DELETE", f"/api/kernels/{kernel['id']}")
            except urllib.error.HTTPError:
                pass  # already gone

    def _server_pid(self) -> int:
        for child in psutil.Process(self.make.pid).children():
            if "jupyter" in " ".join(child.cmdline()):
                return child.pid
        raise RuntimeError("`make lab` answers, but no jupyter process runs under it")

    def own_pids(self) -> set[int]:
        """`make` and the lab server: the processes under the marker that are meant to live."""
        return {self.make.pid, self.server_pid} if self.make else set()

    def stop(self) -> None:
        """Shut the lab down through its API (which shuts its kernels down), then make sure."""
        if self.make is None:
            return
        if self.make.poll() is None:
            try:
                self.shut_down_kernels()
                self.request("POST", "/api/shutdown")
                self.make.wait(timeout=30)
            except (OSError, urllib.error.URLError, subprocess.TimeoutExpired):
                pass
        if self.make.poll() is None:
            os.killpg(self.make.pid, signal.SIGTERM)
            try:
                self.make.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.make.pid, signal.SIGKILL)
        self._log.close()
