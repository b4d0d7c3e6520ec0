"""Start N ranks of a function under a real torch.distributed process group, from a notebook.

`launch(fn, 4)` forks four processes (spawn once CUDA is initialised), each joins a
process group through a fresh rendezvous file, runs `fn`, and sends back its return
value. The parent streams each rank's output with a `[rank r]` prefix, and turns any
failure into a `LaunchError` naming the rank that failed first, with its own traceback.
Whatever happens - an exception, a hang, a killed rank, an interrupted kernel - every
process of the launch is gone when the call returns.

`run_calls` starts independent calls the same way (the sweep's trials, doctor's probe):
children that join no group, a few at a time, each stopped on its own when it ends.

This module checks the arguments and starts the children; what a child runs is in
`child`, the watching in `supervisor`, the wording of failures in `diagnosis`, and the
process handling it shares with the local torchrun nodes in `processes`.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import cloudpickle

from ..core.errors import ChildError, LaunchError, Stopped
from . import bootstrap as rank_setup
from . import limits, processes
from .child import RankSpec, rank_main
from .diagnosis import Outcome, RankFailure
from .start_method import refuse_native_windows
from .supervisor import RankHandle, close_streams, stop_all, supervise, supervise_calls

__all__ = [
    "DEFAULT_TIMEOUT", "Outcome", "RankFailure", "launch", "live_children", "run_calls",
    "run_in_child",
]  # fmt: skip

DEFAULT_TIMEOUT = 120.0
BEFORE_RANKS = "launch interrupted before any rank started: nothing is left running"


CARRIED: list = []  # (wrap, unwrap): what every launch carries into its ranks (`carry`)


def carry(wrap, unwrap) -> None:
    """Have every launch run `wrap(fn)` on its ranks and hand their results to `unwrap(results,
    wrapped)`: how the simulator's recording and link reach the ranks (`network.wire`)."""
    CARRIED.append((wrap, unwrap))


def _unwrapped(results: list, fn) -> list:
    for _, unwrap in reversed(CARRIED):
        results = unwrap(results, fn)
    return results


def launch(
    fn,
    world_size: int,
    *,
    backend: str = "auto",
    timeout: float | None = None,
    args: tuple = (),
    kwargs: dict | None = None,
    start_method: str | None = None,
    allow_failures: bool = False,
) -> list:
    """Run `fn(*args, **kwargs)` on `world_size` ranks and return their results in rank order.

    By default the first failure stops every rank and raises `LaunchError`. With
    `allow_failures=True` the other ranks go on (a training that must survive a dead
    worker), each failed rank's entry in the results is a `RankFailure`, and a line says
    which ranks failed; only if every rank fails does the call raise.

    Inside `fn`, `torch.distributed` is initialised: `dist.get_rank()`, collectives and
    point-to-point operations work as under torchrun. Tensors in the results come back
    on the CPU. `start_method` is chosen for you: fork (fast; each rank computes on one
    thread, see `bootstrap.threads_for`), or spawn for NCCL and once CUDA is in use here
    (each rank gets its share of the cores). `timeout` is the function's own time, from
    the moment every rank has joined the group (starting them may take `START_UP_SECONDS`
    more); it defaults to the profile's `launch_timeout` (120 s on the cpu profile, an hour
    for the gpu profile's full runs).
    """
    refuse_native_windows()
    name = getattr(fn, "__name__", type(fn).__name__)
    kwargs = {} if kwargs is None else kwargs
    for wrap, _ in CARRIED:
        fn = wrap(fn)
    try:  # no rank exists yet: an interrupt here stops nothing, and says so
        timeout = default_timeout() if timeout is None else timeout
        world_size, timeout = _check_arguments(fn, world_size, timeout, args, kwargs)
        backend = rank_setup.resolve_backend(backend, world_size)
        payload = _pickle_payload(fn, args, kwargs)
        ctx = processes.context(start_method, backend)  # the first call waits for imports
        for stream in (sys.stdout, sys.stderr):  # in a kernel, waits for its output thread
            stream.flush()
    except KeyboardInterrupt as interrupt:  # no frames of the launcher
        raise Stopped(str(interrupt) or BEFORE_RANKS) from None
    method = ctx.get_start_method()
    spec = RankSpec(
        world_size=world_size,
        backend=backend,
        timeout=float(timeout),
        init_method="",  # a fresh file, set below
        payload=payload,
        parent_pid=processes.parent_to_die_with(method),
        name=name,
        allow_failures=allow_failures,
        threads=rank_setup.threads_for(world_size, method),
    )
    ranks: list[RankHandle] = []
    interrupted, workdir = False, None

    def start_ranks(spec: RankSpec) -> None:
        with processes.main_module_hidden(method):
            for r in range(world_size):
                with processes.interrupts_held():  # no rank forked unrecorded, no hook eats it
                    ranks.append(_start_rank(ctx, spec, r))

    try:
        with processes.interrupts_held():  # made and recorded, or not made
            workdir = limits.rendezvous_folder()
        spec = replace(spec, init_method=(Path(workdir) / "rendezvous").as_uri())
        start_ranks(spec)
        return _unwrapped(supervise(ranks, spec, restart=start_ranks), fn)
    except KeyboardInterrupt:
        interrupted = True
    except LaunchError as error:
        raise error.with_traceback(None) from None  # no frames of the launcher
    finally:
        stopped = f"launch interrupted: all {world_size} ranks stopped; nothing is left running"
        try:
            with processes.interrupts_held():  # a second interrupt must not cut the cleanup short
                try:
                    stop_all(ranks)
                    close_streams(ranks)
                finally:  # the rendezvous folder goes, whatever stopping the ranks raised
                    if workdir:
                        shutil.rmtree(workdir, ignore_errors=True)
        except KeyboardInterrupt:  # held through the cleanup, even of a launch that finished
            raise Stopped(stopped) from None
    if interrupted:
        raise Stopped(stopped) from None


def run_calls(
    fn,
    calls: Sequence[dict],
    jobs: int = 1,
    timeout: float | None = None,
    start_method: str | None = None,
    gpus: Sequence[str] = (),
    on_done: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Call `fn(**kwargs)` for each `kwargs` in `calls`, each in a new child, `jobs` at once.

    Returns one `Outcome` per call, in the order of `calls`; a call that fails or overruns
    `timeout` does not stop the others. `fn` travels by value, as a rank's does. Children
    are forked unless CUDA runs here; a forked child computes on one thread, a spawned one
    on its share of the cores. With `gpus`, lane k sees only GPU `gpus[k % len(gpus)]`,
    and the children are spawned, as NCCL ranks are: on a machine with a GPU, one SGD step
    on the CPU here (the launcher's warm-up, or any training in the kernel) starts the CUDA
    driver, though `torch.cuda.is_initialized()` stays False, and a forked child then fails
    its first CUDA call ("CUDA error: initialization error": every trial of 01's sweep on an
    H100, 2026-11-28). `on_done` is told of each call as it ends (a progress bar), from this
    process.
    """
    limits.check_jobs(jobs)
    on_a_gpu = "nccl" if gpus else "gloo"  # the backends' start methods: a GPU's is spawn
    ctx = processes.context(start_method, on_a_gpu)  # warms up torch's imports before a fork
    method = ctx.get_start_method()
    threads = rank_setup.threads_for(min(jobs, len(calls)), method)
    spec = RankSpec(
        world_size=1, backend="", timeout=timeout, init_method="", payload=b"",  # set per call
        parent_pid=processes.parent_to_die_with(method),
        name=getattr(fn, "__name__", type(fn).__name__),
        threads=threads, joins_group=False,
    )  # fmt: skip

    def start_call(index: int, lane: int) -> RankHandle:
        gpu = gpus[lane % len(gpus)] if gpus else None
        payload = _pickle_payload(fn, (), calls[index])
        with processes.main_module_hidden(method):
            return _start_rank(ctx, replace(spec, payload=payload, gpu=gpu), index)

    return supervise_calls(start_call, len(calls), jobs, timeout, on_done)


def run_in_child(fn, kwargs: dict | None = None, start_method=None, timeout=None):
    """`fn(**kwargs)`'s return value, computed in a child process; `ChildError` if it fails.

    For a question only a fresh child can answer (doctor's "could a forked child still use
    CUDA?"), asked with the same care as any child of the course: stopped at `timeout`,
    and gone when this returns.
    """
    (outcome,) = run_calls(fn, [kwargs or {}], timeout=timeout, start_method=start_method)
    if outcome.ok:
        return outcome.value
    name = getattr(fn, "__qualname__", repr(fn))
    if outcome.status == "died":
        message = f"the child process running {name} {outcome.error} before answering"
    else:
        message = f"{name} failed in its child process: {outcome.error}"
    raise ChildError(message, outcome)


def default_timeout() -> float:
    """The profile's `launch_timeout`; the cpu profile's when the profile cannot run here."""
    from ..core import profiles
    from ..core.errors import ProfileError

    try:
        return profiles.current().launch_timeout
    except ProfileError:
        return DEFAULT_TIMEOUT


def live_children() -> list[int]:
    """PIDs of processes this one started that are still alive (should be [] after a launch).

    multiprocessing's own helper (the resource tracker that spawn starts once per process,
    and which exits with it) is not counted.
    """
    import psutil

    alive = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() == psutil.STATUS_ZOMBIE or _is_multiprocessing_helper(p.cmdline()):
                continue
        except psutil.NoSuchProcess:
            continue
        alive.append(p.pid)
    return alive


def _is_multiprocessing_helper(cmdline: list[str]) -> bool:
    text = " ".join(cmdline)
    return "multiprocessing.resource_tracker" in text or "multiprocessing.forkserver" in text


# ---------------------------------------------------------------- before and at the start


def _check_arguments(fn, world_size, timeout, args, kwargs) -> tuple[int, float]:
    if not callable(fn):
        raise TypeError(f"launch() needs a function to run on every rank, got {fn!r}.")
    world_size = limits.check_world_size(world_size)
    timeout = limits.check_timeout(timeout)
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args must be a tuple of positional arguments, got {type(args).__name__}.")
    if not isinstance(kwargs, dict):
        raise TypeError(f"kwargs must be a dict, got {type(kwargs).__name__}.")
    return world_size, timeout


def _pickle_payload(fn, args, kwargs) -> bytes:
    """Send the function by value, so that one defined in a notebook cell runs in every rank."""
    try:
        return cloudpickle.dumps((fn, tuple(args), kwargs))
    except Exception as exc:
        culprit = _unpicklable_part(fn, args, kwargs)
        raise TypeError(
            f"{culprit} cannot be sent to the ranks ({type(exc).__name__}: {exc}). Pass plain "
            "data (tensors, numbers, lists, dicts), or create the object inside the function."
        ) from exc


def _unpicklable_part(fn, args, kwargs) -> str:
    parts = [("the function", fn)]
    parts += [(f"argument {i} ({type(a).__name__})", a) for i, a in enumerate(args)]
    parts += [(f"keyword argument {k!r} ({type(v).__name__})", v) for k, v in kwargs.items()]
    for label, value in parts:
        try:
            cloudpickle.dumps(value)
        except Exception:
            return label
    return "an argument"


def _start_rank(ctx, spec: RankSpec, r: int) -> RankHandle:
    """Start rank `r`, or call `r`; a rank's output comes back on pipes, to be prefixed."""
    result_read, result_write = ctx.Pipe()  # duplex: results up, "all joined, go" down
    targets = (sys.stdout, sys.stderr) if spec.joins_group else ()
    outputs = [ctx.Pipe(duplex=False) for _ in targets]
    writes = [result_write, *(write for _, write in outputs)]
    name = f"course-rank-{r}" if spec.joins_group else "course-call"
    process = ctx.Process(target=rank_main, args=(spec, r, *writes), name=name)
    try:
        process.start()
    finally:
        for conn in writes:
            conn.close()
    streams = {
        read.fileno(): [to, b"", read] for to, (read, _) in zip(targets, outputs, strict=True)
    }
    return RankHandle(rank=r, process=process, result_conn=result_read, streams=streams)
