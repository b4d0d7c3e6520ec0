"""The launcher runs real process groups, and every failure path ends fast and clean."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
import torch
import torch.distributed as dist

from course_utils.core.errors import BackendError, LaunchError, LaunchTimeout
from course_utils.core.gpus import GpuCount, visible_gpus
from course_utils.ranks import bootstrap as rank_setup
from course_utils.ranks.launch import launch, live_children


def rank_pid_and_sum():
    t = torch.tensor([dist.get_rank()])
    dist.all_reduce(t)
    return dist.get_rank(), os.getpid(), int(t.item())


def test_results_come_back_in_rank_order_from_a_real_group():
    results = launch(rank_pid_and_sum, 4, backend="gloo")
    assert [r for r, _, _ in results] == [0, 1, 2, 3]
    assert len({pid for _, pid, _ in results}) == 4
    assert all(pid != os.getpid() for _, pid, _ in results)
    assert all(total == 6 for _, _, total in results)  # all_reduce of 0+1+2+3


def test_one_rank_and_arguments():
    assert launch(lambda a, b=0: a + b + dist.get_world_size(), 1, args=(2,), kwargs={"b": 3}) == [
        6
    ]


def test_tensors_come_back_and_equal_the_serial_twin():
    def gather_rows():
        row = torch.arange(5, dtype=torch.float64) * (dist.get_rank() + 1)
        rows = [torch.empty_like(row) for _ in range(dist.get_world_size())]
        dist.all_gather(rows, row)
        return torch.stack(rows)

    results = launch(gather_rows, 3)
    serial = torch.stack([torch.arange(5, dtype=torch.float64) * (r + 1) for r in range(3)])
    assert all(torch.equal(r, serial) for r in results)


def test_rank_output_is_prefixed_with_its_rank(capfd):
    def talk():
        print(f"hello from {dist.get_rank()}")
        print("to stderr", file=sys.stderr)

    launch(talk, 2)
    out, err = capfd.readouterr()
    assert "[rank 0] hello from 0" in out and "[rank 1] hello from 1" in out
    assert "[rank 1] to stderr" in err


def test_forked_ranks_compute_on_one_thread_spawned_ones_share_the_cores():
    assert launch(torch.get_num_threads, 4) == [1] * 4
    spawned = launch(torch.get_num_threads, 1, start_method="spawn")
    assert spawned == [rank_setup.usable_cores()]
    assert rank_setup.threads_per_rank(4) == max(1, rank_setup.usable_cores() // 4)


def test_a_forked_rank_does_not_hang_after_the_parent_used_threads():
    """GNU OpenMP hangs in a child forked after the parent ran a parallel region."""
    torch.set_num_threads(2)
    a = torch.randn(1500, 1500)
    (a @ a).sum()

    def matmuls():
        return float((torch.randn(800, 800) @ torch.randn(800, 800)).sum().isfinite())

    assert launch(matmuls, 1, timeout=60) == [1.0]


def raise_on_rank_2_then_peers_fail():
    if dist.get_rank() == 2:
        raise ZeroDivisionError("rank two divided by zero")
    time.sleep(1.0)
    raise RuntimeError("Connection closed by peer")  # what a peer would see later


def test_rank_that_raises_is_named_with_its_own_traceback(capfd):
    start = time.monotonic()
    with pytest.raises(LaunchError, match="rank 2 of 4 raised ZeroDivisionError") as info:
        launch(raise_on_rank_2_then_peers_fail, 4, timeout=30)
    assert time.monotonic() - start < 10
    err = info.value
    assert err.rank == 2 and err.exc_type == "ZeroDivisionError"
    assert "rank two divided by zero" in err.remote_traceback
    assert "raise_on_rank_2_then_peers_fail" in err.remote_traceback
    assert isinstance(err.original, ZeroDivisionError)
    shown = capfd.readouterr().err
    assert shown.count("Traceback of rank 2 (most recent call last)") == 1
    assert "rank two divided by zero" in shown and err.__cause__ is None
    assert live_children() == []


def test_first_failure_in_time_wins_over_rank_order():
    def late_on_0_early_on_3():
        if dist.get_rank() == 0:
            time.sleep(1.5)
            raise ValueError("rank 0, late")
        if dist.get_rank() == 3:
            raise KeyError("rank 3, first")
        time.sleep(3)

    with pytest.raises(LaunchError, match="rank 3 of 4 raised KeyError"):
        launch(late_on_0_early_on_3, 4, timeout=30)


def test_peer_connection_errors_are_not_blamed():
    def rank_1_fails_inside_a_collective_peer_sees_closed():
        if dist.get_rank() == 1:
            time.sleep(0.3)
            raise OSError("disk full on rank 1")
        dist.barrier()

    with pytest.raises(LaunchError, match="rank 1 of 3 raised OSError"):
        launch(rank_1_fails_inside_a_collective_peer_sees_closed, 3, timeout=30)


# Long enough for every rank of a busy CI machine to reach where it will hang: at 3 s a
# rank still in its start-up was once diagnosed "busy" instead of waiting (no deadlock).
RANKS_SETTLED = 8


def test_hung_rank_is_stopped_at_the_timeout_and_named():
    def hang_on_1():
        if dist.get_rank() == 1:
            time.sleep(600)
        dist.barrier()

    start = time.monotonic()
    with pytest.raises(LaunchTimeout) as info:
        launch(hang_on_1, 2, timeout=RANKS_SETTLED)
    elapsed = time.monotonic() - start
    assert RANKS_SETTLED <= elapsed < RANKS_SETTLED + 12
    message = str(info.value)
    assert f"rank 1 of 2 did not finish within {RANKS_SETTLED} s" in message
    assert "rank 1 was busy" in message and "hang_on_1" in message
    assert "rank 0 was waiting in communication" in message
    assert info.value.rank == 1
    assert live_children() == []


def test_deadlock_is_explained():
    def both_receive_first():
        buf = torch.zeros(1)
        dist.recv(buf, src=1 - dist.get_rank())
        dist.send(buf, dst=1 - dist.get_rank())

    with pytest.raises(LaunchTimeout, match="deadlock"):
        launch(both_receive_first, 2, timeout=RANKS_SETTLED)


def test_ranks_calling_collectives_in_another_order_are_named():
    """The hang met most: rank 1 broadcasts before it all-reduces, the others after. Each
    waits for the others to join its collective; the timeout names rank 1."""

    def rank_1_out_of_order():
        t = torch.ones(4)
        if dist.get_rank() == 1:
            dist.broadcast(t, src=0)
        dist.all_reduce(t)
        if dist.get_rank() != 1:
            dist.broadcast(t, src=0)

    with pytest.raises(LaunchTimeout) as info:
        launch(rank_1_out_of_order, 3, timeout=RANKS_SETTLED)
    message = str(info.value)
    assert "in different collectives: rank 1 in broadcast, the others in all_reduce" in message
    assert info.value.rank == 1


def test_rank_killed_by_sigkill_is_reported():
    def die_on_1():
        if dist.get_rank() == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        dist.barrier()

    start = time.monotonic()
    with pytest.raises(LaunchError, match="rank 1 of 3 was killed by SIGKILL") as info:
        launch(die_on_1, 3, timeout=30)
    assert time.monotonic() - start < 10
    assert info.value.rank == 1
    assert live_children() == []


def test_rank_that_exits_is_reported():
    def exit_on_0():
        if dist.get_rank() == 0:
            os._exit(3)
        dist.barrier()

    with pytest.raises(LaunchError, match="rank 0 of 2 exited with code 3"):
        launch(exit_on_0, 2, timeout=30)


def test_grandchildren_are_stopped_too():
    def start_a_sleeper():
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        print(f"sleeper {proc.pid}")
        raise RuntimeError("leaving a child behind")

    with pytest.raises(LaunchError):
        launch(start_a_sleeper, 1, timeout=30)
    assert live_children() == []


@pytest.mark.parametrize(
    "fn, world_size, kwargs, error, match",
    [
        ("not callable", 2, {}, TypeError, "needs a function"),
        (rank_pid_and_sum, 0, {}, ValueError, "world_size must be a whole number >= 1"),
        (rank_pid_and_sum, 2.0, {}, ValueError, "world_size"),
        (rank_pid_and_sum, 2, {"timeout": 0}, ValueError, "timeout must be a positive"),
        (rank_pid_and_sum, 2, {"backend": "mpi"}, ValueError, "is not one of"),
        (rank_pid_and_sum, 2, {"args": 5}, TypeError, "args must be a tuple"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(fn, world_size, kwargs, error, match):
    with pytest.raises(error, match=match):
        launch(fn, world_size, **kwargs)
    assert live_children() == []


class Unpicklable:
    def __reduce__(self):
        raise TypeError("this object refuses to be pickled")


def test_unpicklable_argument_is_named_before_start():
    with pytest.raises(TypeError, match=r"argument 1 \(Unpicklable\) cannot be sent"):
        launch(rank_pid_and_sum, 2, args=(1, Unpicklable()))


def test_unpicklable_result_is_a_clear_error():
    with pytest.raises(LaunchError, match="cannot be sent back"):
        launch(Unpicklable, 2)


def test_nccl_without_gpus_says_what_to_use():
    if visible_gpus().count:
        pytest.skip("this machine has GPUs")
    with pytest.raises(BackendError, match="backend='gloo'"):
        launch(rank_pid_and_sum, 2, backend="nccl")


@pytest.mark.parametrize(
    "gpus, backend, world_size, expected",
    [
        (0, "auto", 4, "gloo"),
        (0, "gloo", 4, "gloo"),
        (4, "auto", 4, "nccl"),
        (8, "nccl", 2, "nccl"),
        (1, "gloo", 4, "gloo"),
        (1, "auto", 4, BackendError),
        (2, "nccl", 4, BackendError),
        (0, "nccl", 1, BackendError),
    ],
)
def test_backend_resolution(monkeypatch, gpus, backend, world_size, expected):
    monkeypatch.setattr(rank_setup, "visible_gpus", lambda: GpuCount(gpus, "a test"))
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    if expected is BackendError:
        with pytest.raises(BackendError, match="Use backend='gloo'"):
            rank_setup.resolve_backend(backend, world_size)
    else:
        assert rank_setup.resolve_backend(backend, world_size) == expected


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_function_defined_in_a_script_runs_under(method, tmp_path):
    """A function from __main__ (as in a notebook) travels by value, even without the guard.
    Under forkserver a rank's parent is the server, not this process: it must still run
    (it used to exit with code 1 at once, taking the server for a dead parent)."""
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import torch.distributed as dist
            from course_utils.ranks.launch import launch

            def times_ten():
                return dist.get_rank() * 10

            print(launch(times_ten, 2, start_method="{method}"))
            """
        )
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[0, 10]"


LONG_RUNNING = textwrap.dedent(
    """
    import os, signal, sys, time
    import torch.distributed as dist
    from course_utils.ranks.launch import launch

    # An interrupt raises KeyboardInterrupt, as in a kernel, even where the test runner was
    # started in the background of a shell, whose children inherit SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def report_and_sleep():
        print(f"PID {os.getpid()}", flush=True)
        time.sleep(600)

    launch(report_and_sleep, 2, timeout=600)
    """
)


def _start_launcher(tmp_path, **popen):
    script = tmp_path / "long.py"
    script.write_text(LONG_RUNNING)
    proc = subprocess.Popen(
        [sys.executable, "-u", str(script)], stdout=subprocess.PIPE, text=True, **popen
    )
    pids = []
    deadline = time.monotonic() + 60
    while len(pids) < 2 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "PID" in line:
            pids.append(int(line.split()[-1]))
    assert len(pids) == 2, "ranks did not start"
    return proc, pids


def _all_gone(pids, within=10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(psutil.pid_exists(p) and _not_zombie(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def _not_zombie(pid) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_interrupt_stops_every_rank(tmp_path):
    proc, pids = _start_launcher(tmp_path)
    proc.send_signal(signal.SIGINT)  # what "interrupt kernel" does
    proc.wait(timeout=30)
    assert _all_gone(pids)


@pytest.mark.parametrize("method", [None, "forkserver"])
def test_killed_parent_takes_its_ranks_with_it(tmp_path, method):
    """Under forkserver the ranks are the server's children, and each was handed the
    kernel's end of the server's alive pipe: unless they close it, the server outlived the
    kernel for them and they, tied to it, for the server."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # where the killed launcher's folders stay
    if method:
        env["COURSE_START_METHOD"] = method
    proc, pids = _start_launcher(tmp_path, env=env)
    proc.kill()  # what "restart kernel" does to the old kernel
    proc.wait(timeout=30)
    assert _all_gone(pids)


def test_two_launches_at_once_do_not_collide(tmp_path):
    script = tmp_path / "twice.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch, torch.distributed as dist, time
            from course_utils.ranks.launch import launch

            def total():
                t = torch.tensor([dist.get_rank() + 1])
                for _ in range(20):
                    dist.all_reduce(t)
                    t.fill_(dist.get_rank() + 1)
                    time.sleep(0.02)
                dist.all_reduce(t)
                return int(t.item())

            print(launch(total, 3))
            """
        )
    )
    procs = [
        subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert all(out.strip().splitlines()[-1] == "[6, 6, 6]" for out in outs)


def test_allow_failures_lets_the_others_finish_and_reports_the_dead(capfd):
    def rank_1_dies_others_work():
        if dist.get_rank() == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.5)  # the others keep working after rank 1 is gone
        return dist.get_rank() * 100

    results = launch(rank_1_dies_others_work, 3, timeout=30, allow_failures=True)
    assert results[0] == 0 and results[2] == 200
    failure = results[1]
    assert failure.rank == 1 and failure.kind == "died" and "SIGKILL" in failure.message
    assert "rank 1 of 3 was killed by SIGKILL" in capfd.readouterr().err
    assert live_children() == []


def test_allow_failures_still_raises_when_every_rank_fails():
    def everyone_fails():
        raise RuntimeError(f"rank {dist.get_rank()} gives up")

    with pytest.raises(LaunchError, match="raised RuntimeError"):
        launch(everyone_fails, 2, timeout=30, allow_failures=True)


def test_a_rank_that_crashes_in_cpp_shows_its_python_stack(capfd):
    def abort_on_1():
        if dist.get_rank() == 1:
            os.abort()
        dist.barrier()

    with pytest.raises(LaunchError, match="rank 1 of 2 was killed by SIGABRT"):
        launch(abort_on_1, 2, timeout=30)
    err = capfd.readouterr().err
    assert "[rank 1] Fatal Python error: Aborted" in err
    assert "abort_on_1" in err


def test_an_interrupt_before_any_rank_starts_says_nothing_is_left_running(monkeypatch):
    from course_utils.ranks import launch as launching

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(launching, "_pickle_payload", interrupted)
    with pytest.raises(KeyboardInterrupt, match="before any rank started: nothing is left"):
        launching.launch(print, 2)
    assert launching.live_children() == []


def test_an_interrupt_during_the_cleanup_of_a_finished_launch_gives_the_message(monkeypatch):
    from course_utils.ranks import launch as launching

    real_close = launching.close_streams

    def close_then_interrupted(ranks):
        real_close(ranks)
        raise KeyboardInterrupt  # as a held SIGINT is raised when the cleanup ends

    monkeypatch.setattr(launching, "close_streams", close_then_interrupted)
    with pytest.raises(KeyboardInterrupt, match="all 2 ranks stopped; nothing is left running"):
        launching.launch(os.getpid, 2)
    assert launching.live_children() == []


def test_gloo_s_connection_lines_are_not_shown():
    from course_utils.ranks.rank_output import is_gloo_noise

    line = b"[Gloo] Rank 0 is connected to 3 peer ranks. Expected number of connected peer ranks"
    assert is_gloo_noise(line + b" is : 3")
    assert not is_gloo_noise(b"[Gloo] something the learner should see")
    assert not is_gloo_noise(b"rank 0 is connected to 3 peer ranks")


def _says_why_then_dies():
    if dist.get_rank() == 1:
        print("out of memory in my C extension", file=sys.stderr, flush=True)
        os._exit(3)
    dist.barrier()


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_a_rank_that_dies_shows_its_last_lines_in_the_error(method):
    with pytest.raises(LaunchError) as caught:
        launch(_says_why_then_dies, 2, start_method=method, timeout=60)
    message = str(caught.value)
    assert "rank 1 of 2 exited with code 3 before returning a result" in message
    assert "Its last lines of output:\n    out of memory in my C extension" in message


def test_the_timeout_is_the_functions_own_time_not_the_ranks_start_up():
    """Spawned ranks take seconds to start (each imports torch); a 1 s timeout still lets a
    quick function run, since it counts from when every rank has joined the group."""
    assert launch(dist.get_rank, 2, timeout=1, start_method="spawn") == [0, 1]
