"""One start method for every child the course starts: the platform's safe default, or
COURSE_START_METHOD; NCCL ranks always spawn. Python 3.14 and macOS are faked here."""

from __future__ import annotations

import multiprocessing as mp
import os
import sys

import pytest
import torch

from course_utils.core.gpus import GpuCount
from course_utils.ranks import start_method
from course_utils.ranks.launch import launch


@pytest.fixture(autouse=True)
def _no_choice_set(monkeypatch):
    monkeypatch.delenv(start_method.START_METHOD_VAR, raising=False)


def test_linux_below_3_14_forks_and_nccl_spawns():
    assert start_method.default_start_method("gloo") == "fork"
    assert start_method.default_start_method("nccl") == "spawn"


def test_macos_and_python_3_14_use_forkserver(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    method, why = start_method.start_method_and_why()
    assert method == "forkserver" and "macOS" in why
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(sys, "version_info", (3, 14, 0))
    assert start_method.start_method_and_why() == ("forkserver", "Python 3.14's default on Linux")


def test_a_machine_with_a_gpu_starts_gloo_ranks_from_a_fork_server(monkeypatch):
    """After one backward pass in the kernel, autograd's per-GPU threads make a forked
    child's backward fail; the fork server never ran one."""
    monkeypatch.setattr(start_method, "visible_gpus", lambda: GpuCount(1, "a test"))
    method, why = start_method.start_method_and_why("gloo")
    assert method == "forkserver" and "GPU" in why
    assert start_method.default_start_method("nccl") == "spawn"
    monkeypatch.setenv(start_method.START_METHOD_VAR, "fork")  # the learner's choice stands
    assert start_method.default_start_method("gloo") == "fork"


def test_where_nothing_can_fork_or_cuda_runs_here_ranks_spawn(monkeypatch):
    monkeypatch.setattr(mp, "get_all_start_methods", lambda: ["spawn"])
    assert start_method.start_method_and_why()[0] == "spawn"
    monkeypatch.undo()  # undoes the fixture's too: under make test-start-methods it is set
    monkeypatch.delenv(start_method.START_METHOD_VAR, raising=False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert start_method.start_method_and_why()[0] == "spawn"


def test_the_variable_chooses_for_every_child_but_nccl(monkeypatch):
    monkeypatch.setenv(start_method.START_METHOD_VAR, " ForkServer ")
    assert start_method.start_method_and_why() == ("forkserver", "COURSE_START_METHOD=forkserver")
    assert start_method.default_start_method("nccl") == "spawn"
    parents = launch(os.getppid, 2)  # the forkserver's server forked them, not this process
    assert parents[0] == parents[1] != os.getpid()


@pytest.mark.parametrize(
    "value, fake, says",
    [
        ("threads", None, "not a start method: use one of fork, forkserver, spawn"),
        ("forkserver", "no forkserver", "this platform cannot forkserver; use spawn"),
        ("fork", "cuda here", "CUDA runs in this process"),
    ],
)
def test_a_choice_that_cannot_work_is_refused_with_what_to_do(monkeypatch, value, fake, says):
    monkeypatch.setenv(start_method.START_METHOD_VAR, value)
    if fake == "no forkserver":
        monkeypatch.setattr(mp, "get_all_start_methods", lambda: ["fork", "spawn"])
    if fake == "cuda here":
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(ValueError, match=says):
        start_method.default_start_method()


def _nothing_may_start(*args, **kwargs):
    raise AssertionError("something ran after the Windows check")


def test_native_windows_stops_the_first_launch_with_the_way_to_wsl2(monkeypatch):
    from course_utils.ranks import launch as launch_module

    monkeypatch.setattr(launch_module.processes, "context", _nothing_may_start)
    monkeypatch.setattr(launch_module.limits, "rendezvous_folder", _nothing_may_start)
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(start_method.NativeWindows, match="WSL2") as refused:
        launch(os.getpid, 2)
    assert "wsl --install" in str(refused.value) and "make lab" in str(refused.value)


def test_native_windows_stops_doctor_with_one_message_and_exit_code_1(monkeypatch, capsys):
    from course_utils import __main__ as cli
    from course_utils.course import doctor

    monkeypatch.setattr(doctor, "report", _nothing_may_start)
    monkeypatch.setattr(cli, "build_parser", _nothing_may_start)
    monkeypatch.setattr(sys, "platform", "win32")
    assert cli.main(["doctor"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Linux or macOS" in err and "wsl --install" in err


SERVER_PROBE = """
import sys
import course_utils.ddp.cost  # a chapter the notebook imported before its first launch
from course_utils.ranks.launch import launch

def what_a_rank_starts_with():
    return "course_utils.ddp.cost" in sys.modules, "sympy" in sys.modules

print(launch(what_a_rank_starts_with, 2, backend="gloo"))
"""


def test_ranks_forked_from_the_server_start_with_the_kernels_chapter_and_torchs_lazy_imports():
    """Under forkserver a rank starts from the server, not the kernel: the server imports the
    course modules the kernel has, and runs one SGD step (sympy, torch._dynamo), as it starts;
    without them each rank paid about 1.2 s and 2.5 s on its own, on every launch."""
    import subprocess

    env = {**os.environ, start_method.START_METHOD_VAR: "forkserver"}
    out = subprocess.run(
        [sys.executable, "-c", SERVER_PROBE], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[(True, True), (True, True)]"
