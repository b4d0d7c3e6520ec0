"""What crosses `torch.distributed`, counted (and charged on the simulated wire) from outside.

An algorithm the course teaches, or one the learner writes, calls `dist.isend`, `dist.recv`,
`dist.batch_isend_irecv` or `dist.all_reduce` as the PyTorch tutorials do. Inside
`recording()` (and inside `wire.active(link)`) those functions are torch's own, wrapped:
each call is written to every open `Log` (`messages`: what, to or from whom, how many
bytes, and which part of the model sent it, `labels`), and on a simulated link each
point-to-point message, and each blocking all-reduce of a sum, pays its wire time on the
rank's clock (`wire`). So a byte count is what really passed the boundary, never what the
code that sent it claims, and the learner's code is counted and simulated exactly as the
course's. Other collectives are counted but not charged: no lesson times one yet.

This is the one module that assigns to `torch.distributed`'s attributes; it puts torch's
own functions back when the last block closes.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import time

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from .messages import COLLECTIVES, POINT_TO_POINT, Log, Message, leaving, nbytes

_local = threading.local()  # depth of wrapped calls on this thread: inner ones pass through
_open: list[Log] = []
_simulators: list = []  # the simulated wire (`wire`), while a simulated link is active
_installed: dict[str, object] = {}  # name: torch's own function, while wrapped


def torch_own(name: str):
    """Torch's own function `name`, wrapped or not: what the simulator calls underneath."""
    return _installed.get(name) or getattr(c10d, name)


def _global_peer(peer, group, group_peer) -> int | None:
    if group_peer is not None and group is not None:
        return dist.get_global_rank(group, group_peer)
    return group_peer if peer is None else peer


def writing() -> bool:
    """Whether a recording is open in this process (then `launch` records in every rank)."""
    return bool(_open)


def _write(message: Message) -> None:
    for log in _open:
        log.messages.append(message)


def _snapshot(message: Message, tensor: torch.Tensor | None = None) -> Message:
    watched = next((log.watch for log in _open if log.watch is not None), None)
    if watched is None:
        return message
    message.before = watched.detach().clone().cpu()  # cpu: a picture, not a rank's data
    same = tensor is not None and tensor.untyped_storage().data_ptr() == (
        watched.untyped_storage().data_ptr()
    )
    if same:
        start = (tensor.data_ptr() - watched.data_ptr()) // watched.element_size()
        message.span = (start, start + tensor.numel())
    return message


class _Arrival:
    """An irecv's handle while recording: its `wait()` writes that the message is in."""

    def __init__(self, work, message: Message):
        self.work, self.message = work, message

    def wait(self, *args, **kwargs):
        began = _now()
        result = self.work.wait(*args, **kwargs)
        m = self.message
        arrived = Message("arrived", m.rank, m.nbytes, m.peer, where=m.where, direction=m.direction)
        arrived.began, arrived.ended = began, _now()
        _write(_snapshot(arrived))
        return result

    def __getattr__(self, name):
        return getattr(self.work, name)


def _now() -> float:
    """The rank's clock: the link clock on a simulated link (`wire.now`), else the wall's."""
    return _simulators[-1].now() if _simulators else time.perf_counter()


def _bookkeeping():
    return _simulators[-1].not_counted() if _simulators else contextlib.nullcontext()


def _point_to_point(name: str, own):
    signature = inspect.signature(own)
    key = "dst" if name in ("send", "isend") else "src"

    def wrapped(*args, **kwargs):
        if getattr(_local, "depth", 0):
            return own(*args, **kwargs)
        with _bookkeeping():  # counting is not the rank's work, on the simulated clock
            bound = signature.bind(*args, **kwargs).arguments
            tensor, group, tag = bound["tensor"], bound.get("group"), bound.get("tag", 0)
            peer = _global_peer(bound.get(key), group, bound.get(f"group_{key}"))
            message = _snapshot(Message(name, dist.get_rank(), nbytes(tensor), peer), tensor)
            if name != "recv":
                _write(message)
        _local.depth, message.began = 1, _now()
        try:
            if _simulators:
                result = _simulators[-1].charged(name, tensor, peer, group, tag)
            else:
                result = own(tensor, peer, group, tag)
        finally:
            _local.depth, message.ended = 0, _now()
        if name == "recv":
            message.peer = result if peer is None else peer
            _write(message)
        if name == "irecv" and _open:
            return _Arrival(result, message)
        return result

    return wrapped


def _collective(name: str, own):
    signature = inspect.signature(own)
    arguments, share = COLLECTIVES[name]

    def wrapped(*args, **kwargs):
        if getattr(_local, "depth", 0):
            return own(*args, **kwargs)
        with _bookkeeping():
            bound = signature.bind(*args, **kwargs).arguments
            group = bound.get("group")
            ranks = tuple(dist.get_process_group_ranks(group)) if group is not None else None
            size = len(ranks) if ranks else dist.get_world_size()
            held = next((nbytes(bound[a]) for a in arguments if bound.get(a) is not None), 0)
            if name in ("gather", "scatter") and arguments[0] not in bound:
                held *= size  # a non-root rank holds one piece of the whole
            sent = leaving(name, bound, group) if "all_to_all" in name else None
            sent = round(held * share(size)) if sent is None else sent
            _write(Message(name, dist.get_rank(), sent, None, ranks))
        _local.depth = 1
        try:
            if _simulators and name == "all_reduce" and _charged_as_ring(bound):
                return _simulators[-1].all_reduce(bound["tensor"], group)
            return own(*args, **kwargs)
        finally:
            _local.depth = 0

    return wrapped


def _charged_as_ring(bound: dict) -> bool:
    """A blocking sum: what `wire.all_reduce` charges as a ring on the simulated link (an
    async one, DDP's, is charged by its comm hook; a MAX is the simulator's own)."""
    op = bound.get("op", dist.ReduceOp.SUM)
    return not bound.get("async_op") and op in (dist.ReduceOp.SUM, dist.ReduceOp.SUM.value)


def _install() -> None:
    for name in POINT_TO_POINT + tuple(COLLECTIVES):
        own = getattr(c10d, name, None)
        if own is None:  # not in this torch
            continue
        _installed[name] = own
        wrapped = (_point_to_point if name in POINT_TO_POINT else _collective)(name, own)
        wrapped.__wrapped__ = own
        setattr(c10d, name, wrapped)  # P2POp checks its op against c10d's isend and irecv
        setattr(dist, name, wrapped)


def _uninstall() -> None:
    for name, own in _installed.items():
        setattr(c10d, name, own)
        setattr(dist, name, own)
    _installed.clear()


_users = [0]


@contextlib.contextmanager
def intercepting():
    """torch.distributed's communication wrapped for the block (nested blocks share it)."""
    if not _users[0]:
        _install()
    _users[0] += 1
    try:
        yield
    finally:
        _users[0] -= 1
        if not _users[0]:
            _uninstall()


@contextlib.contextmanager
def simulated(wire):
    """Point-to-point messages in the block pay their wire time: `wire.charged(op, tensor,
    peer, group, tag)` sends them (`network.wire` passes itself)."""
    with intercepting():
        _simulators.append(wire)
        try:
            yield
        finally:
            _simulators.remove(wire)


def write(messages: list[Message]) -> None:
    """Messages recorded elsewhere (on the ranks of a launch), written to the open logs."""
    for message in messages:
        _write(message)


@contextlib.contextmanager
def recording(watch: torch.Tensor | None = None):
    """Every call at the `torch.distributed` boundary in the block, on this rank: a `Log`.
    With `watch`, each message keeps that tensor as it was when the call began (a
    step-through picture of an algorithm, taken from outside it)."""
    log = Log(watch=watch)
    with intercepting():
        _open.append(log)
        try:
            yield log
        finally:
            _open.remove(log)
