"""Pre-flight limits, rendezvous folders, and the wording of what went wrong on a rank."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
import torch.distributed as dist

from course_utils.core.errors import LaunchError
from course_utils.ranks import limits
from course_utils.ranks.launch import launch, live_children


def rank_of():
    return dist.get_rank()


def test_a_numpy_integer_is_a_world_size():
    assert launch(rank_of, np.int64(2)) == [0, 1]


def test_more_ranks_than_the_machine_holds_are_refused_naming_the_override(monkeypatch):
    monkeypatch.delenv(limits.MAX_RANKS_VAR, raising=False)
    with pytest.raises(
        ValueError, match=rf"world_size=100000 .* at most \d+ .*{limits.MAX_RANKS_VAR}"
    ):
        launch(rank_of, 100_000)
    monkeypatch.setenv(limits.MAX_RANKS_VAR, "3")
    with pytest.raises(ValueError, match="at most 3"):
        launch(rank_of, 4)
    assert live_children() == []


def test_the_cap_leaves_room_for_the_course_and_names_its_reason(monkeypatch):
    monkeypatch.delenv(limits.MAX_RANKS_VAR, raising=False)
    limit, why = limits.max_ranks()
    assert limit >= 1 and ("per core" in why or "memory" in why)


@pytest.mark.parametrize("timeout", [float("inf"), float("nan"), -1, 0, True, "10"])
def test_a_timeout_must_be_a_finite_positive_number(timeout):
    with pytest.raises(ValueError, match="positive, finite number of seconds"):
        launch(rank_of, 2, timeout=timeout)


def test_rendezvous_folders_of_dead_launchers_are_swept(tmp_path):
    dead = 2**22 + 12345  # above the usual pid_max of 4194304: no such process
    stale = tmp_path / f"{limits.RENDEZVOUS_PREFIX}{dead}-abc"
    mine = tmp_path / f"{limits.RENDEZVOUS_PREFIX}{os.getpid()}-def"
    other = tmp_path / f"{limits.RENDEZVOUS_PREFIX}xyz"  # an older name: not ours to judge
    for folder in (stale, mine, other):
        folder.mkdir()
    assert limits.sweep_rendezvous_folders(str(tmp_path)) == [stale]
    assert mine.exists() and other.exists() and not stale.exists()


def test_a_launch_leaves_no_rendezvous_folder():
    launch(rank_of, 2)
    assert not list(
        p
        for p in os.scandir(tempfile.gettempdir())
        if p.name.startswith(f"{limits.RENDEZVOUS_PREFIX}{os.getpid()}-")
    )


def test_a_function_that_calls_no_collective_never_fails_to_launch():
    """The start-up race: a rank that finished early closed sockets a peer was connecting."""
    for _ in range(15):
        assert launch(rank_of, 4) == [0, 1, 2, 3]


def _divide_on_2():
    if dist.get_rank() == 2:
        return 1 / 0
    return dist.get_rank()


def test_a_ranks_traceback_shows_once_under_one_header_without_launcher_frames(capfd):
    with pytest.raises(LaunchError) as info:
        launch(_divide_on_2, 3)
    shown = capfd.readouterr().err
    assert shown.count("Traceback") == 1 and "Traceback of rank 2 (most recent call last):" in shown
    assert "_divide_on_2" in shown and "child.py" not in shown
    assert "ZeroDivisionError: division by zero" in shown
    frames = [f.name for f in _frames(info.value.__traceback__)]
    assert "supervise" not in frames and "raise_failure" not in frames


def _frames(tb):
    import traceback

    return traceback.extract_tb(tb)


def _explode():
    raise RuntimeError("this value cannot be rebuilt in the notebook")


class RebuildsBadly:
    def __reduce__(self):
        return (_explode, ())


def _unreadable_on_1():
    return RebuildsBadly() if dist.get_rank() == 1 else 0


def test_a_result_that_cannot_be_unpickled_names_its_rank():
    with pytest.raises(LaunchError, match="rank 1 of 2 returned a value that cannot be unpickled"):
        launch(_unreadable_on_1, 2)


def _recv_from_a_rank_that_returned():
    import torch

    if dist.get_rank() == 1:
        dist.recv(torch.zeros(1), src=0)
    return dist.get_rank()


def test_a_peer_that_returned_normally_is_not_called_a_crash():
    with pytest.raises(LaunchError, match="No rank crashed: rank 0 had returned normally"):
        launch(_recv_from_a_rank_that_returned, 2, timeout=20)


def test_a_connection_broken_while_the_group_forms_starts_the_ranks_again(monkeypatch, capfd):
    """No learner's code has run before every rank joined, so the launch starts them again."""
    from course_utils.ranks import bootstrap, supervisor

    real = bootstrap.init_process_group

    def flaky_join(backend, timeout, init_method, rank=None, world_size=None):
        if rank == 1 and not init_method.endswith(".1"):  # the first start only
            print("set-up noise that the learner should not see", flush=True)
            raise RuntimeError("Gloo connectFullMesh failed with ... Connection closed by peer")
        return real(backend, timeout, init_method, rank=rank, world_size=world_size)

    monkeypatch.setattr(bootstrap, "init_process_group", flaky_join)  # forked ranks inherit it
    before = supervisor.setup_restarts
    assert launch(rank_of, 2, timeout=20) == [0, 1]
    assert supervisor.setup_restarts == before + 1
    assert "set-up noise" not in capfd.readouterr().out
    assert live_children() == []
