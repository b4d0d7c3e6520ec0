"""Inter-model parallelism: a hyperparameter search whose trials run side by side.

A config of the report's shape (`algorithm`, `parameters`, `spec`, `budget`, `seed`) is
checked in full before anything starts (`sweep_config.validate`), then each trial runs
in its own process, `jobs` at a time, its threads capped (one when forked, its share of
the cores when spawned), on its own GPU where there are GPUs, and tied to this process's
life. A trial that fails is
recorded with its error while the others go on; whatever happens - an error, a timeout,
an interrupt - no trial process is left running when `run` returns.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import wait

import cloudpickle

from ..core import progress
from ..core.gpus import visible_device_ids
from ..ranks import bootstrap as rank_setup
from ..ranks import processes
from .sweep_config import SweepConfigError, resolve_trial, trials_from, validate
from .trials import train_trial

__all__ = [
    "SweepConfigError", "SweepResult", "Trial", "cli", "read_config", "run", "train_trial",
    "validate",
]  # fmt: skip


@dataclass
class Trial:
    index: int
    params: dict
    metrics: dict | None = None
    error: str | None = None  # "ValueError: ..." when the trial failed
    traceback: str | None = None
    slot: int = 0  # which of the `jobs` lanes ran it
    start: float = 0.0  # seconds after the sweep started
    end: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and self.metrics is not None

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class SweepResult:
    config: dict
    jobs: int
    seconds: float  # wall time of the whole search
    trials: list[Trial] = field(default_factory=list)

    @property
    def metric(self) -> str:
        return self.config["spec"]["metric"]

    @property
    def best(self) -> Trial | None:
        done = [t for t in self.trials if t.ok]
        if not done:
            return None
        sign = 1 if self.config["spec"]["objective"] == "minimize" else -1
        return min(done, key=lambda t: sign * t.metrics[self.metric])

    def mean_by(self, parameter: str, metric: str) -> dict:
        """The metric averaged over the successful trials sharing each value of `parameter`."""
        groups: dict = {}
        for t in self.trials:
            if t.ok:
                groups.setdefault(t.params[parameter], []).append(t.metrics[metric])
        return {value: sum(v) / len(v) for value, v in groups.items()}

    @property
    def failed(self) -> list[Trial]:
        return [t for t in self.trials if not t.ok]

    def table(self) -> str:
        """One line per trial: its parameters, the metric, its time, or its error."""
        best = self.best
        lines = []
        for t in self.trials:
            params = ", ".join(f"{k}={v:g}" if _num(v) else f"{k}={v}" for k, v in t.params.items())
            outcome = f"{self.metric}={t.metrics[self.metric]:.4f}" if t.ok else f"FAILED {t.error}"
            mark = "  <- best" if t is best else ""
            lines.append(f"trial {t.index:>2}  {params:<30} {outcome}  {t.seconds:6.2f} s{mark}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        best = self.best
        return {
            "jobs": self.jobs,
            "seconds": self.seconds,
            "metric": self.metric,
            "objective": self.config["spec"]["objective"],
            "trials": [{**asdict(t), "seconds": t.seconds} for t in self.trials],
            "best": None if best is None else {**asdict(best), "seconds": best.seconds},
        }


def _plain(v):
    """A tensor or numpy scalar as a Python number, so results print and dump as JSON."""
    return v.item() if hasattr(v, "item") and getattr(v, "ndim", 0) == 0 else v


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def run(
    config: dict,
    jobs: int = 2,
    trial=None,
    timeout: float | None = None,
    start_method: str | None = None,
) -> SweepResult:
    """Validate `config`, then run its trials `jobs` at a time, each in its own process.

    `trial` is the function a trial calls with its parameters (default: the config's
    `trial`, else `train_trial`); it must return a dict holding the spec's metric.
    `timeout` (seconds) stops a trial that runs longer and records it as failed. Trials
    are forked (instant) unless CUDA is initialised here; a forked trial runs one thread,
    since GNU OpenMP hangs in a child that uses several after its parent did. With
    `start_method="spawn"` each trial gets its share of the cores instead.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a whole number >= 1, got {jobs!r}.")
    fn = trial or resolve_trial(config.get("trial") if isinstance(config, dict) else None)
    config = validate(config, fn)
    trials = [Trial(i, params) for i, params in enumerate(trials_from(config))]
    payload = cloudpickle.dumps(fn)
    ctx = processes.context(start_method)  # warms up torch's imports before a fork
    method = ctx.get_start_method()
    threads = rank_setup.threads_for(min(jobs, len(trials)), method)
    gpus = visible_device_ids()
    pending, running = list(trials), {}  # slot -> (process, connection, trial)
    bar = progress.bar(len(trials), f"trials, {jobs} at a time", "trial")
    started = time.perf_counter()
    try:
        while pending or running:
            for slot in range(jobs):
                if slot not in running and pending:
                    t = pending.pop(0)
                    t.slot, t.start = slot, time.perf_counter() - started
                    gpu = gpus[slot % len(gpus)] if gpus else None
                    with processes.main_module_hidden(method), processes.interrupts_held():
                        running[slot] = (*_start(ctx, payload, t.params, threads, gpu), t)
            before = len(running)
            _collect(running, started, timeout)
            bar.update(before - len(running))
    finally:
        bar.close()
        processes.stop(*(process for process, _, _ in running.values()))
        for _, conn, _ in running.values():
            conn.close()
    metric = config["spec"]["metric"]
    for t in trials:
        if t.metrics is not None and metric not in t.metrics:
            t.error = f"KeyError: the trial returned no {metric!r}, only {', '.join(t.metrics)}"
    return SweepResult(config, jobs, time.perf_counter() - started, trials)


def _start(ctx, payload: bytes, params: dict, threads: int, gpu: str | None):
    read, write = ctx.Pipe(duplex=False)
    args = (payload, params, threads, gpu, os.getpid(), write)
    process = ctx.Process(target=_trial_main, args=args, name="course-trial", daemon=True)
    process.start()
    write.close()
    return process, read


def _trial_main(payload, params, threads, gpu, parent_pid, conn) -> None:
    """In the trial's process: cap threads, pick the GPU, run, send back metrics or the error."""
    processes.child_setup(parent_pid, threads)
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    try:
        metrics = cloudpickle.loads(payload)(**params)
        if not isinstance(metrics, dict):
            raise TypeError(f"a trial must return a dict of metrics, got {type(metrics).__name__}")
        message = ("ok", {k: _plain(v) for k, v in metrics.items()})
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the parent
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        message = ("error", (f"{type(exc).__name__}: {exc}", text))
    try:
        conn.send(message)
    except Exception as exc:  # metrics that cannot be pickled
        conn.send(("error", (f"{type(exc).__name__}: {exc}", "")))
    sys.stdout.flush()
    os._exit(0)


def _collect(running: dict, started: float, timeout: float | None) -> None:
    """Wait for the next trial to finish (or time out) and record its outcome."""
    waits = {}
    for slot, (process, conn, _) in running.items():
        waits[conn] = waits[process.sentinel] = slot
    ready = wait(list(waits), timeout=1.0 if timeout else None)
    now = time.perf_counter() - started
    for slot in sorted({waits[obj] for obj in ready}):
        process, conn, t = running.pop(slot)
        if conn.poll():
            try:
                status, body = conn.recv()
            except (EOFError, OSError):
                status, body = "error", (_exit_reason(process), "")
        else:
            status, body = "error", (_exit_reason(process), "")
        if status == "ok":
            t.metrics = body
        else:
            t.error, t.traceback = body
        t.end = now
        processes.stop(process)
        conn.close()
    if timeout:
        for slot in [s for s, (*_, t) in running.items() if now - t.start > timeout]:
            process, conn, t = running.pop(slot)
            processes.stop(process)
            conn.close()
            t.error, t.end = f"TimeoutError: stopped after {timeout:g} s", now


def _exit_reason(process) -> str:
    process.join(timeout=1.0)
    return f"the trial process {processes.exit_reason(process.exitcode)} before returning metrics"


def read_config(path) -> dict:
    """A sweep config from its JSON file (the report's Comet `optim.config` too)."""
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise SweepConfigError(f"no config file {str(path)!r}.") from None
    except OSError as exc:  # a directory, no permission
        raise SweepConfigError(f"cannot read the config {str(path)!r} ({exc.strerror}).") from None
    except json.JSONDecodeError as exc:
        raise SweepConfigError(f"{path} is not valid JSON ({exc}).") from None


def cli(args) -> int:
    """`python -m course_utils sweep CONFIG.json -j N [--json]`: 0 when a trial succeeded."""
    if args.jobs < 1:
        print(
            f"sweep: -j must be a whole number of trials at a time >= 1, got {args.jobs}.",
            file=sys.stderr,
        )
        return 2
    try:
        config = read_config(args.config)
    except SweepConfigError as exc:
        print(f"sweep: {exc}", file=sys.stderr)
        return 2
    try:
        result = run(config, jobs=args.jobs)
    except (SweepConfigError, ValueError) as exc:
        print(f"sweep: bad config {args.config}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.as_dict(), indent=1, default=str))
    else:
        print(result.table())
        print(f"{len(result.trials)} trials, {args.jobs} at a time, in {result.seconds:.1f} s")
    for t in result.failed:
        print(f"trial {t.index} failed: {t.error}", file=sys.stderr)
    return 0 if result.best is not None else 1
