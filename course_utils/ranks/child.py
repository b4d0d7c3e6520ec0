"""A rank's side of `launch`: set up, join the group, run the function, send back what came of it.

A call (`launch.run_calls`: a sweep's trial, doctor's probe) runs here too, as a child
that joins no group and prints straight to its own standard streams.

The result travels back pickled, its tensors moved to the CPU; an exception travels back
described (type, message, traceback, the object itself when it pickles), marked as
secondary when it is a peer's failure seen from here rather than this rank's own.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import pickle
import signal
import sys
import time
import traceback
from dataclasses import dataclass

import cloudpickle
import torch
import torch.distributed as dist

from ..core import progress
from . import bootstrap as rank_setup
from . import processes
from .limits import START_UP_SECONDS

# Messages that a rank raises because a *peer* failed, not because of its own code.
_SECONDARY_MARKERS = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "socket closed",
    "remote process exited",
    "timed out",
    "timeout",
    "nccl communicator was aborted",
)


@dataclass(frozen=True)
class RankSpec:
    """What every rank of one launch is told: the group to join and the function to run."""

    world_size: int
    backend: str
    timeout: float | None  # None: a call without a time limit
    init_method: str
    payload: bytes
    parent_pid: int | None  # the process to die with (None: the forkserver that forked it)
    name: str
    allow_failures: bool = False
    threads: int = 1
    joins_group: bool = True  # False: an independent call
    gpu: str | None = None  # the one GPU an independent call sees, if any


def rank_main(spec: RankSpec, r: int, result_conn, out_conn=None, err_conn=None) -> None:
    """Runs in the child: bootstrap, run the function, send back its result or its error."""
    fds = [None if conn is None else conn.fileno() for conn in (out_conn, err_conn)]
    processes.child_setup(spec.parent_pid, spec.threads, *fds)  # a call keeps fds 1 and 2
    # A crash in C++ (gloo aborting on a bad buffer, a segfault) shows this rank's Python
    # stack under its own prefix; an inherited handler would write to the parent's terminal.
    faulthandler.enable(file=sys.stderr, all_threads=False)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=False)
    if spec.joins_group:
        rank_setup.set_rank_environment(r, spec.world_size, r, spec.world_size)
    if spec.backend == "gloo" and "GLOO_SOCKET_IFNAME" not in os.environ:
        lo = rank_setup.loopback_interface()
        if lo:
            os.environ["GLOO_SOCKET_IFNAME"] = lo
    if spec.gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = spec.gpu
    joined = not spec.joins_group
    try:  # choosing the GPU is inside: a CUDA failure here is this rank's error, named
        rank_setup.prepare(spec.backend, r, spec.threads)
        fn, args, kwargs = cloudpickle.loads(spec.payload)
        if spec.joins_group:
            # the group's own timeout outlasts the launch's, so a hang is the launcher's
            # to diagnose (where every rank is), not a collective's error on one of them
            rank_setup.init_process_group(
                spec.backend, spec.timeout + START_UP_SECONDS, spec.init_method,
                rank=r, world_size=spec.world_size,
            )  # fmt: skip
            joined = True
            _wait_for_every_rank_to_join(result_conn)
            if r == 0:  # one bar per launch: rank 0's, drawn by the parent
                progress.send_as_lines()
        value = fn(*args, **kwargs)
        message = ("ok", _dumps_result(_to_cpu(value)))
    except BaseException as exc:  # noqa: BLE001 - everything must reach the parent
        message = ("error", {**_describe_exception(exc), "in_setup": not joined})
    sys.stdout.flush()
    sys.stderr.flush()
    result_conn.send_bytes(pickle.dumps(message))
    if message[0] == "error" and spec.joins_group:
        # Stay until the parent stops us: exiting now would make every peer fail with a
        # "connection closed" of its own, burying this rank's real error in their noise.
        time.sleep(spec.timeout + 60)
    rank_setup.leave(0)


def _wait_for_every_rank_to_join(conn) -> None:
    """Tell the parent this rank joined the group; start the function once every rank has.

    gloo's ranks connect to each other in `init_process_group`. A rank that ran ahead,
    finished and closed its sockets while a peer was still connecting made that peer fail
    with "connectFullMesh failed ... Connection closed by peer" (7 of 300 launches of a
    function that calls no collective). Holding every rank here until all have joined
    also means that a failure to connect happens before any of the learner's code runs,
    so the parent can start the ranks again instead of failing the launch.
    """
    conn.send_bytes(pickle.dumps(("joined", None)))
    try:
        conn.recv_bytes()
    except (EOFError, OSError):
        os._exit(1)  # the parent is gone: nobody is left to run for


def _dumps_result(value) -> bytes:
    try:
        return cloudpickle.dumps(value)
    except Exception as exc:
        raise TypeError(
            f"the function returned a {type(value).__name__}, which cannot be sent back "
            f"({exc}). Return plain data: tensors, numbers, lists, dicts."
        ) from exc


def _to_cpu(value):
    """`value` with every tensor in it moved to the CPU, however deeply it sits: in lists,
    tuples, named tuples, dicts and dataclasses (a `Trace` of CUDA tensors, unpickled in
    the learner's kernel, would start CUDA there and poison its next fork)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*(_to_cpu(v) for v in value))
    if type(value) in (list, tuple, set, frozenset):
        return type(value)(_to_cpu(v) for v in value)
    if isinstance(value, dict):
        moved = {k: _to_cpu(v) for k, v in value.items()}
        return moved if type(value) is dict else _rebuilt(value, moved)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _moved_fields(value)
    return value


def _rebuilt(mapping, moved: dict):
    """A dict subclass (OrderedDict, defaultdict) with its entries moved, or as it was."""
    try:
        copy = mapping.copy()
        copy.update(moved)
        return copy
    except Exception:  # noqa: BLE001 - a mapping we cannot copy goes home as it is
        return mapping


def _moved_fields(value):
    """A copy of dataclass `value` with its fields moved (init=False fields too)."""
    copy = object.__new__(type(value))
    state = getattr(value, "__dict__", None)
    if state is None:  # slots
        for field in dataclasses.fields(value):
            object.__setattr__(copy, field.name, _to_cpu(getattr(value, field.name)))
        return copy
    for name, item in state.items():
        object.__setattr__(copy, name, _to_cpu(item))
    return copy


def _describe_exception(exc: BaseException) -> dict:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next  # the learner's frames, not the launcher's
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    try:
        original = cloudpickle.dumps(exc)
        pickle.loads(original)
    except Exception:
        original = None
    message = str(exc)
    return {
        "when": time.monotonic(),
        "exc_type": type(exc).__name__,
        "message": message,
        "traceback": text,
        "original": original,
        "secondary": _is_secondary(exc, message),
    }


def _is_secondary(exc: BaseException, message: str) -> bool:
    """A communication error is usually a peer's failure seen from here, not this rank's own."""
    comm_errors = tuple(
        t for t in (getattr(dist, "DistError", None), getattr(dist, "DistBackendError", None)) if t
    )
    lowered = message.lower()
    return isinstance(exc, comm_errors) or any(m in lowered for m in _SECONDARY_MARKERS)
