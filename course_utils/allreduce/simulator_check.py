"""Does the network simulator give this machine's real times? The one check that is not circular.

The simulator (`network`) charges every message alpha + n * beta on the clocks of the
ranks that send and receive it, and counts each rank's own work: its python, the
reduction's adds. Set to the terms fitted on the real link here (`network.fit`: a
ping-pong, a simultaneous exchange and a local add, each from runs of its own, never from
the runs they are compared with), it should give the real link's times for the
hand-written algorithms with a core per rank (design.md: within 30% from 1 MiB).

One launch does it all, on the same processes: the fit, then every algorithm and size on
the real link and in the simulator, taking turns within each repeat, so that whatever the
machine does meanwhile (its clock speed, its caches, other programs) falls on both alike.
And then again, `fits` times in all: on loopback one fit's bandwidth can be a third off
the next one's (two processes waking each other on two cores), and that error moves every
simulated time alike, so a row is judged by the median of its ratio over the fits.
"""

from __future__ import annotations

import statistics

import torch

from ..core import progress
from ..core.backends import GLOO
from ..network import fit, wire
from ..ranks.bootstrap import device
from ..ranks.launch import launch
from .runs import _time_once

ALGORITHMS = ("ring", "tree", "butterfly", "parameter_server")


def against_the_real_link(
    world_size: int, nbytes: tuple, repeats: int = 5, fits: int = 3, timeout: float = 300.0
) -> list[dict]:
    """One check per fit: {"terms": fit.LinkTerms, "link": the simulated link they make,
    "real": {algorithm: [seconds per size]}, "simulated": {...}}, the fastest repeat of
    each, the real ones on the wall clock (each rank should have a core: `world_size` <=
    the cores)."""
    if isinstance(fits, bool) or not isinstance(fits, int) or fits < 1:
        raise ValueError(f"fits must be a whole number >= 1, got {fits!r}.")
    args = (tuple(nbytes), repeats, fits)
    return launch(_checks_on_rank, world_size, args=args, timeout=timeout, backend=GLOO)[0]


def ratios(checks: list[dict]) -> dict[str, list[float]]:
    """{algorithm: [simulated / real per size]}, each the median over the fits."""
    return _median_over_fits(
        [
            {name: [s / r for s, r in zip(c["simulated"][name], real, strict=True)]}
            for c in checks
            for name, real in c["real"].items()
        ]
    )


def medians(checks: list[dict], clock: str) -> dict[str, list[float]]:
    """{algorithm: [seconds per size]} on `clock` ("real" or "simulated"), the median over
    the fits."""
    return _median_over_fits([c[clock] for c in checks])


def _median_over_fits(tables: list[dict]) -> dict[str, list[float]]:
    """The tables ({algorithm: [value per size]}, one or more per fit) merged, each value
    the median of that algorithm's values at that size."""
    merged: dict[str, list[list[float]]] = {}
    for table in tables:
        for name, row in table.items():
            merged.setdefault(name, []).append(row)
    return {
        name: [statistics.median(column) for column in zip(*rows, strict=True)]
        for name, rows in merged.items()
    }


def _checks_on_rank(nbytes: tuple, repeats: int, fits: int) -> list[dict]:
    """Rank 0's bar counts the rounds after each fit (every algorithm once on each clock)."""
    rounds = fits * len(nbytes) * (repeats + 1)
    with progress.bar(rounds, "simulator against the link", "round") as bar:
        return [_check_once(nbytes, repeats, bar) for _ in range(fits)]


def _check_once(nbytes: tuple, repeats: int, bar) -> dict:
    terms = fit.fit_link_terms(fit.FIT_BYTES, fit.measure_on_ranks(fit.FIT_BYTES, repeats))
    link = terms.link()
    times = {
        clock: {a: [[] for _ in nbytes] for a in ALGORITHMS} for clock in ("real", "simulated")
    }
    for k, n in enumerate(nbytes):
        bar.set_postfix(bytes=f"{n:,}")
        x = torch.ones(max(1, n // 4), dtype=torch.float32, device=device())
        for i in range(repeats + 1):  # the first warms buffers and connections up
            for name in ALGORITHMS:
                for clock, over in (("real", wire.REAL), ("simulated", link)):
                    with wire.active(over):
                        seconds = _time_once(name, x)
                    if i:
                        times[clock][name][k].append(seconds)
            bar.update(1)
    fastest = {c: {a: [min(ts) for ts in v] for a, v in t.items()} for c, t in times.items()}
    return {"terms": terms, "link": link, **fastest}
