"""Comet Optimizer's config format, read as it is written, so the report's file runs unchanged.

The report drove its search with a Comet config:

    {"algorithm": "random",
     "parameters": {"batch_size": {"type": "discrete", "values": [8, 32, 128, 512]}},
     "spec": {"metric": "val_loss", "objective": "minimize"}}

`translate` turns such a config into the course's own (see `sweep_config`): parameter
`type`s (integer, float/double, discrete, categorical) with their `scalingType`, the
spec's `maxCombo` (how many trials at most; 0 means as many as there are combinations),
`gridSize` (points per range in a grid), `randomize` (shuffle the grid), the top-level
`trials` (runs per parameter set), and the spec keys that only matter on Comet's servers
(`retryLimit`, `retryAssignLimit`, `minSampleSize`), which have no effect here. `bayes`
needs Comet's service, so it is refused with what to use instead. `as_json` reads the
file's text as Comet does, with its `#` comments and trailing commas.
"""

from __future__ import annotations

import math
import re

from ..core.errors import CourseError

SCALING = {"uniform": "uniform", "linear": "uniform", "loguniform": "log_uniform"}
SERVER_ONLY = ("retryLimit", "retryAssignLimit", "minSampleSize")
SPEC_KEYS = ("metric", "objective", "maxCombo", "gridSize", "randomize", "seed", *SERVER_ONLY)
DEFAULT_GRID_SIZE = 10  # Comet's
_STRING = r'"(?:[^"\\\n]|\\.)*"'  # a JSON string, escapes included, on one line
_COMMENT = re.compile(rf"({_STRING})|#[^\n]*")
_TRAILING_COMMA = re.compile(rf"({_STRING})|,(?=\s*[}}\]])")


class CometConfigError(CourseError, ValueError):
    """A Comet config this course cannot run; the message names the key."""


def as_json(text: str) -> str:
    """Comet's config text as plain JSON, for `json.loads`.

    Comet's documentation, and the report after it, writes configs with `#` comments and
    a comma after the last item, which JSON refuses. Strings are matched first, so a `#`
    or `,}` inside one stays; a comment goes but not its newline, and a comma becomes a
    space, so JSON's line and column numbers still point into the file as written.
    """
    text = _COMMENT.sub(lambda m: m.group(1) or "", text)
    return _TRAILING_COMMA.sub(lambda m: m.group(1) or " ", text)


def is_comet(config: dict) -> bool:
    """A config written for Comet: typed parameters, Comet's spec keys or `trials`."""
    parameters = config.get("parameters")
    typed = isinstance(parameters, dict) and any(
        isinstance(p, dict) and "type" in p for p in parameters.values()
    )
    spec = config.get("spec") if isinstance(config.get("spec"), dict) else {}
    return typed or "trials" in config or any(k in spec for k in SPEC_KEYS[2:])


def translate(config: dict) -> dict:
    """The same search in the course's format; raises CometConfigError for what cannot run."""
    algorithm = config.get("algorithm")
    if algorithm == "bayes":
        raise CometConfigError(
            "algorithm: 'bayes' is not supported here (it needs Comet's optimizer service); "
            "use 'random' or 'grid'."
        )
    spec = dict(config.get("spec") or {})
    unknown = [k for k in spec if k not in SPEC_KEYS]
    if unknown:
        raise CometConfigError(f"spec.{unknown[0]}: unknown key; spec has {', '.join(SPEC_KEYS)}.")
    max_combo = _whole(spec.pop("maxCombo", 0), "spec.maxCombo", low=0)
    grid_size = _whole(spec.pop("gridSize", DEFAULT_GRID_SIZE), "spec.gridSize", low=1)
    randomize = spec.pop("randomize", False)
    if not isinstance(randomize, bool):
        raise CometConfigError(f"spec.randomize: expected true or false, got {randomize!r}.")
    seed = spec.pop("seed", config.get("seed", 0))
    for key in SERVER_ONLY:
        spec.pop(key, None)
    grid = algorithm == "grid"
    parameters = {
        name: _parameter(name, p, grid, grid_size)
        for name, p in (config.get("parameters") or {}).items()
    }
    out = {k: v for k, v in config.items() if k not in ("spec", "parameters", "trials")}
    out.update(parameters=parameters, spec=spec, seed=seed)
    repeats = _whole(config.get("trials", 1), "trials", low=1)
    if repeats > 1:
        out["repeats"] = repeats
    if randomize:
        out["shuffle"] = True
    if max_combo:
        out["budget"] = max_combo
    elif algorithm == "random" and "budget" not in config:
        out["budget"] = _combinations(parameters, "spec.maxCombo")
        out["without_replacement"] = True
    return out


def _parameter(name: str, p, grid: bool, grid_size: int) -> dict:
    key = f"parameters.{name}"
    if not isinstance(p, dict) or "type" not in p:
        return p  # the course's own format, checked by sweep_config
    kind = p["type"]
    if kind in ("discrete", "categorical"):
        values = p.get("values")
        if not isinstance(values, list) or not values:
            raise CometConfigError(f"{key}.values: a {kind} parameter needs a list of values.")
        if kind == "discrete" and not all(_number(v) for v in values):
            raise CometConfigError(f"{key}.values: discrete values are numbers; use categorical.")
        return {"values": list(values)}
    if kind not in ("integer", "float", "double"):
        raise CometConfigError(
            f"{key}.type: {kind!r} is not one of integer, float, double, discrete, categorical."
        )
    scaling = p.get("scalingType", "uniform")
    if scaling not in SCALING:
        raise CometConfigError(
            f"{key}.scalingType: {scaling!r} is not supported here; use "
            f"{', '.join(SCALING)} (normal and lognormal need Comet's service)."
        )
    low, high = p.get("min"), p.get("max")
    if not (_number(low) and _number(high)) or not low < high:
        raise CometConfigError(f"{key}: an {kind} range needs numbers 'min' < 'max'.")
    if kind == "integer":
        if grid:
            count = min(grid_size, int(high) - int(low) + 1)
            return {"values": sorted({round(v) for v in _spaced(low, high, count, scaling)})}
        return {"min": low, "max": high, "distribution": "int_uniform"}
    if grid:
        return {"values": _spaced(low, high, grid_size, scaling)}
    return {"min": low, "max": high, "distribution": SCALING[scaling]}


def _spaced(low: float, high: float, count: int, scaling: str) -> list[float]:
    """`count` grid points from low to high, evenly or evenly in log space."""
    if count == 1:
        return [low]
    if SCALING[scaling] == "log_uniform":
        if low <= 0:
            raise CometConfigError("a loguniform range needs min > 0.")
        a, b = math.log(low), math.log(high)
        return [math.exp(a + (b - a) * i / (count - 1)) for i in range(count)]
    return [low + (high - low) * i / (count - 1) for i in range(count)]


def _combinations(parameters: dict, key: str) -> int:
    if not all(isinstance(p, dict) and "values" in p for p in parameters.values()):
        raise CometConfigError(
            f"{key}: missing; a random search over a range needs the number of trials "
            "(maxCombo, or the course's 'budget')."
        )
    return math.prod(len(p["values"]) for p in parameters.values())


def _whole(value, key: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise CometConfigError(f"{key}: expected a whole number >= {low}, got {value!r}.")
    return value


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
