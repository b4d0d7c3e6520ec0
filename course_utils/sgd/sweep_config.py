"""The sweep config, checked in full before any trial starts, and the trials it asks for.

The shape is the report's:

    {"algorithm": "grid" | "random",
     "parameters": {"batch_size": {"values": [8, 32]},                    # discrete
                    "lr": {"min": 1e-3, "max": 1e-1, "distribution": "log_uniform"}},
     "spec": {"metric": "val_loss", "objective": "minimize" | "maximize"},
     "budget": 8,          # how many trials (random: required; grid: a cap)
     "seed": 0,            # random draws
     "trial": "package.module:function"}                              # optional

Comet Optimizer's own format (the report's file) is read too: see `comet`. A mistake
found after an hour of trials is an hour lost, so every key is checked first and the
error names the key and what would be valid.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import math
import random

from ..core.errors import CourseError
from . import comet

ALGORITHMS = ("grid", "random")
OBJECTIVES = ("minimize", "maximize")
DISTRIBUTIONS = ("uniform", "log_uniform", "int_uniform")
KEYS = (
    "algorithm", "parameters", "spec", "budget", "seed", "trial", "name", "description",
    "repeats", "shuffle", "without_replacement",
)  # fmt: skip


class SweepConfigError(CourseError, ValueError):
    """A sweep config that cannot run; the message names the offending key."""


def resolve_trial(spec: str | None):
    """The trial function a config names as 'module:function' (default: trials.train_trial)."""
    if spec is None:
        from .trials import train_trial

        return train_trial
    if not isinstance(spec, str) or ":" not in spec:
        raise SweepConfigError(f"trial: expected 'package.module:function', got {spec!r}.")
    module_name, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise SweepConfigError(f"trial: cannot import {spec!r} ({exc}).") from exc


def validate(config, trial) -> dict:
    """Return a checked copy of `config` with defaults filled in, or raise SweepConfigError."""
    if not isinstance(config, dict):
        raise SweepConfigError(f"the config must be a JSON object, got {type(config).__name__}.")
    if comet.is_comet(config):
        try:
            config = comet.translate(config)
        except comet.CometConfigError as exc:
            raise SweepConfigError(str(exc)) from None
    unknown = [k for k in config if k not in KEYS]
    if unknown:
        raise SweepConfigError(f"unknown key {unknown[0]!r}; the keys are {', '.join(KEYS)}.")
    algorithm = _required(config, "algorithm", f"use one of {', '.join(ALGORITHMS)}")
    if algorithm not in ALGORITHMS:
        raise SweepConfigError(
            f"algorithm: {algorithm!r} is not one of {', '.join(map(repr, ALGORITHMS))}."
        )
    parameters = _required(config, "parameters", "give each parameter 'values' or a range")
    if not isinstance(parameters, dict) or not parameters:
        raise SweepConfigError("parameters: expected a non-empty object of parameter -> values.")
    _check_names(parameters, trial)
    checked = {name: _parameter(name, p, algorithm) for name, p in parameters.items()}
    _check_values(checked, getattr(trial, "check_value", None))
    spec = _required(config, "spec", "e.g. {'metric': 'val_loss', 'objective': 'minimize'}")
    if not isinstance(spec, dict):
        raise SweepConfigError("spec: expected an object with 'metric' and 'objective'.")
    extra = [k for k in spec if k not in ("metric", "objective")]
    if extra:
        raise SweepConfigError(f"spec.{extra[0]}: unknown key; spec has 'metric' and 'objective'.")
    metric = spec.get("metric")
    if not isinstance(metric, str) or not metric:
        raise SweepConfigError(
            "spec.metric: missing; name the metric to optimise, e.g. 'val_loss'."
        )
    known = getattr(trial, "metrics", None)
    if known is not None and metric not in known:
        raise SweepConfigError(
            f"spec.metric: {metric!r} is not a metric {_name(trial)} reports; it reports "
            f"{', '.join(known)}."
        )
    objective = spec.get("objective")
    if objective not in OBJECTIVES:
        raise SweepConfigError(
            f"spec.objective: {objective!r} is not one of {', '.join(map(repr, OBJECTIVES))}."
        )
    budget = config.get("budget")
    if budget is not None and (
        isinstance(budget, bool) or not isinstance(budget, int) or budget < 1
    ):
        raise SweepConfigError(f"budget: expected a whole number of trials >= 1, got {budget!r}.")
    if algorithm == "random" and budget is None:
        raise SweepConfigError("budget: missing; a random search needs the number of trials.")
    seed = config.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SweepConfigError(f"seed: expected a whole number, got {seed!r}.")
    repeats = config.get("repeats", 1)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise SweepConfigError(f"repeats: expected a whole number >= 1, got {repeats!r}.")
    return {
        **config,
        "algorithm": algorithm,
        "parameters": checked,
        "spec": {"metric": metric, "objective": objective},
        "budget": budget,
        "seed": seed,
        "repeats": repeats,
    }


def _required(config: dict, key: str, hint: str):
    if key not in config:
        raise SweepConfigError(f"{key}: missing; {hint}.")
    return config[key]


def _name(trial) -> str:
    return getattr(trial, "__name__", type(trial).__name__)


def _check_names(parameters: dict, trial) -> None:
    """Refuse a parameter the trial function does not take, before a single trial runs."""
    try:
        signature = inspect.signature(trial)
    except (TypeError, ValueError):
        return
    kinds = {p.kind for p in signature.parameters.values()}
    if inspect.Parameter.VAR_KEYWORD in kinds:
        return
    takes = [
        n
        for n, p in signature.parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    for name in parameters:
        if name not in takes:
            raise SweepConfigError(
                f"parameters.{name}: {_name(trial)} takes no parameter {name!r}; "
                f"it takes {', '.join(takes) or 'none'}."
            )


def _check_values(parameters: dict, check_value) -> None:
    """Every value a trial could receive, checked by the trial's own rules (if it has any)."""
    for name, p in parameters.items():
        values = p["values"] if p["distribution"] == "discrete" else [p["min"], p["max"]]
        kinds = {_kind(v) for v in values}
        if len(kinds) > 1:  # 8 and "32" cannot be compared, sorted or averaged together
            raise SweepConfigError(
                f"parameters.{name}.values: mixed kinds of value ({', '.join(map(repr, values))}); "
                "give them all as numbers, or all as names."
            )
        for value in values if check_value else ():
            problem = check_value(name, value)
            if problem:
                raise SweepConfigError(f"parameters.{name}: {problem}.")


def _kind(v) -> str:
    return "number" if isinstance(v, (int, float)) and not isinstance(v, bool) else type(v).__name__


def _parameter(name: str, p, algorithm: str) -> dict:
    key = f"parameters.{name}"
    if not isinstance(p, dict):
        raise SweepConfigError(f"{key}: expected {{'values': [...]}} or {{'min': .., 'max': ..}}.")
    distribution = p.get("distribution", "discrete" if "values" in p else "uniform")
    if "values" in p:
        unexpected = [k for k in p if k not in ("values", "distribution")]
        if unexpected or distribution != "discrete":
            raise SweepConfigError(
                f"{key}: 'values' makes a discrete parameter; drop "
                f"{unexpected[0] if unexpected else 'distribution'!r}."
            )
        values = p["values"]
        if not isinstance(values, list) or not values:
            raise SweepConfigError(f"{key}.values: empty; give at least one value to try.")
        return {"distribution": "discrete", "values": list(values)}
    if "min" not in p or "max" not in p:
        raise SweepConfigError(f"{key}: give either 'values' or both 'min' and 'max'.")
    if algorithm == "grid":
        raise SweepConfigError(f"{key}: a grid search needs discrete 'values', not a range.")
    if distribution not in DISTRIBUTIONS:
        raise SweepConfigError(
            f"{key}.distribution: {distribution!r} is not one of {', '.join(DISTRIBUTIONS)}."
        )
    low, high = p["min"], p["max"]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
        raise SweepConfigError(f"{key}: 'min' and 'max' must be numbers, got {low!r}, {high!r}.")
    if not low < high:
        raise SweepConfigError(f"{key}: 'min' ({low}) must be below 'max' ({high}).")
    if distribution == "log_uniform" and low <= 0:
        raise SweepConfigError(f"{key}.min: a log_uniform range needs min > 0, got {low}.")
    return {"distribution": distribution, "min": low, "max": high}


def grid_config(parameters: dict, metric: str = "test_acc", objective: str = "maximize") -> dict:
    """A grid search over `parameters` (name -> the values to try), optimising `metric`."""
    return {
        "algorithm": "grid",
        "parameters": {name: {"values": list(values)} for name, values in parameters.items()},
        "spec": {"metric": metric, "objective": objective},
    }


def trials_from(config: dict) -> list[dict]:
    """The parameter sets to run, each `repeats` times.

    A grid is every combination (shuffled with `shuffle`, capped at `budget`); a random
    search is `budget` draws, or with `without_replacement` (Comet's random search over
    discrete values) `budget` different combinations in random order.
    """
    parameters, budget = config["parameters"], config["budget"]
    rng = random.Random(config["seed"])
    if config["algorithm"] == "grid" or config.get("without_replacement"):
        names = list(parameters)
        combos = itertools.product(*(parameters[n]["values"] for n in names))
        sets = [dict(zip(names, combo, strict=True)) for combo in combos]
        if config.get("shuffle") or config.get("without_replacement"):
            rng.shuffle(sets)
        sets = sets[:budget] if budget else sets
    else:
        sets = [{n: _draw(rng, p) for n, p in parameters.items()} for _ in range(budget)]
    return [dict(s) for s in sets for _ in range(config.get("repeats", 1))]


def _draw(rng: random.Random, p: dict):
    if p["distribution"] == "discrete":
        return rng.choice(p["values"])
    if p["distribution"] == "int_uniform":
        return rng.randint(math.ceil(p["min"]), math.floor(p["max"]))
    if p["distribution"] == "log_uniform":
        return math.exp(rng.uniform(math.log(p["min"]), math.log(p["max"])))
    return rng.uniform(p["min"], p["max"])
