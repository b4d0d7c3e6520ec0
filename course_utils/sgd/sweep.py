"""Inter-model parallelism: a hyperparameter search whose trials run side by side.

A config of the report's shape (`algorithm`, `parameters`, `spec`, `budget`, `seed`) is
checked in full before anything starts (`sweep_config.validate`), then each trial runs
in its own process, `jobs` at a time, its threads capped (one when forked, its share of
the cores when spawned), on its own GPU where there are GPUs, and tied to this process's
life; `launch`'s process manager starts, watches and reaps them (`ranks.launch.run_calls`).
A trial that fails is recorded with its error while the others go on; whatever happens -
an error, a timeout, an interrupt - no trial process is left running when `run` returns.
`run_command` runs the terminal's `python -m course_utils sweep ...` from a notebook and
reads its result back.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import asdict, dataclass, field, fields
from functools import partial
from pathlib import Path

from ..core import progress
from ..core.errors import CourseError
from ..core.gpus import visible_device_ids
from ..ranks import limits, processes
from ..ranks.launch import Outcome, run_calls
from . import comet
from .sweep_config import SweepConfigError, resolve_trial, trials_from, validate
from .trials import train_trial

__all__ = [
    "SweepConfigError", "SweepResult", "Trial", "cli", "read_config", "run", "run_command",
    "train_trial", "validate",
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

    def finished(self) -> list[Trial]:
        """Every trial, or a RuntimeError naming how many failed and the first error: what a
        chapter reading the results asks first, since a mean over the trials that happened
        to succeed would look like a result."""
        if self.failed:
            raise RuntimeError(f"{len(self.failed)} trial(s) failed, first: {self.failed[0].error}")
        return list(self.trials)

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
            "config": self.config,
            "jobs": self.jobs,
            "seconds": self.seconds,
            "metric": self.metric,
            "objective": self.config["spec"]["objective"],
            "trials": [{**asdict(t), "seconds": t.seconds} for t in self.trials],
            "best": None if best is None else {**asdict(best), "seconds": best.seconds},
        }

    @classmethod
    def from_dict(cls, d: dict) -> SweepResult:
        """The result `as_dict` wrote (what `sweep --json` prints), as a result again."""
        names = {f.name for f in fields(Trial)}
        trials = [Trial(**{k: v for k, v in t.items() if k in names}) for t in d["trials"]]
        return cls(d["config"], d["jobs"], d["seconds"], trials)


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
    limits.check_jobs(jobs)
    fn = trial or resolve_trial(config.get("trial") if isinstance(config, dict) else None)
    config = validate(config, fn)
    trials = [Trial(i, params) for i, params in enumerate(trials_from(config))]
    bar = progress.bar(len(trials), f"trials, {jobs} at a time", "trial")
    try:
        outcomes = run_calls(
            partial(_metrics_of, fn),
            [t.params for t in trials],
            jobs=jobs,
            timeout=timeout,
            start_method=start_method,
            gpus=visible_device_ids(),
            on_done=lambda outcome: bar.update(1),
        )
    finally:
        bar.close()
    started = min(o.start for o in outcomes)
    for t, o in zip(trials, outcomes, strict=True):
        t.slot, t.start, t.end = o.slot, o.start - started, o.end - started
        _record(t, o, config["spec"]["metric"])
    return SweepResult(config, jobs, max(o.end for o in outcomes) - started, trials)


def _metrics_of(trial, /, **params) -> dict:
    """In the trial's process: the trial's metrics as plain numbers, or why they are not."""
    metrics = trial(**params)
    if not isinstance(metrics, dict):
        raise TypeError(f"a trial must return a dict of metrics, got {type(metrics).__name__}")
    return {k: _plain(v) for k, v in metrics.items()}


def _record(t: Trial, outcome: Outcome, metric: str) -> None:
    """Put a trial's metrics or its error on its record, in the words the sweep's table uses."""
    if outcome.ok and metric not in outcome.value:
        t.metrics = outcome.value
        t.error = f"KeyError: the trial returned no {metric!r}, only {', '.join(outcome.value)}"
    elif outcome.ok:
        t.metrics = outcome.value
    elif outcome.status == "died":
        t.error = f"the trial process {outcome.error} before returning metrics"
    else:
        t.error, t.traceback = outcome.error, outcome.traceback or None


def read_config(path) -> dict:
    """A sweep config file, read as Comet reads one: the report printed its `optim.config`
    as Comet's documentation writes configs, with `#` comments and trailing commas, and
    the course runs that text as printed."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise SweepConfigError(f"no config file {str(path)!r}.") from None
    except OSError as exc:  # a directory, no permission
        raise SweepConfigError(f"cannot read the config {str(path)!r} ({exc.strerror}).") from None
    try:
        return json.loads(comet.as_json(text))
    except json.JSONDecodeError as exc:
        raise SweepConfigError(_not_json(path, text, exc)) from None


def _not_json(path, text: str, exc: json.JSONDecodeError) -> str:
    """Where a config stops being JSON, as the line it is on in the file, and what to do."""
    line, problem = exc.lineno, f"{exc.msg}; fix that line or the one before it"
    if not exc.doc[exc.pos :].strip():  # it ran out of text: a bracket is missing somewhere above
        line = text.rstrip().count("\n") + 1
        problem = "the text ends before every { and [ is closed; add the missing } or ]"
    written = text.splitlines()[line - 1].strip() if text.strip() else ""
    return (
        f"{path}, line {line} ({written!r}): not valid JSON: {problem}. Comet's # comments "
        "and trailing commas are allowed."
    )


def run_command(command: str) -> SweepResult:
    """Run `python -m course_utils sweep ... --json` as a terminal would, and read its result.

    The report ran its search as a command on its config file; a notebook that runs that
    very line shows the file and the command work as printed. `python` is this kernel's
    Python; `--json` is added if missing. The command runs in a child process that dies with
    this one; exit code 2 (a bad config or `-j`) raises `SweepConfigError` with its message.
    Its bar of finished trials comes back as lines on stderr (`progress.LineBar`) and is
    drawn here, since a command's own bar would only reach a pipe.
    """
    argv = shlex.split(command)
    if argv[:4] != ["python", "-m", "course_utils", "sweep"]:
        raise ValueError(
            f"run_command runs `python -m course_utils sweep [-j N] CONFIG`, got {command!r}."
        )
    argv = [sys.executable, *argv[1:], *([] if "--json" in argv else ["--json"])]
    bar = progress.Mirror()
    try:
        env = {**os.environ, progress.LINES_VAR: "1"}
        done = processes.run_command(argv, on_error_line=bar.feed, env=env)
    finally:
        bar.close()
    said = done.stderr.decode(errors="replace").strip()
    if done.returncode == 2:
        raise SweepConfigError(said.removeprefix("sweep: "))
    if done.returncode not in (0, 1) or not done.stdout.strip():  # 1 and a result: all failed
        raise CourseError(f"`{command}` {processes.exit_reason(done.returncode)}:\n{said}")
    return SweepResult.from_dict(json.loads(done.stdout))


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
