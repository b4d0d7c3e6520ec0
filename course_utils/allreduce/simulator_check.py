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
"""

from __future__ import annotations

import torch

from ..core import progress
from ..core.backends import GLOO
from ..network import fit, wire
from ..ranks.bootstrap import device
from ..ranks.launch import launch
from .runs import _time_once

__all__ = ["ALGORITHMS", "against_the_real_link", "ratios"]

ALGORITHMS = ("ring", "tree", "butterfly", "parameter_server")


def against_the_real_link(
    world_size: int, nbytes: tuple, repeats: int = 5, timeout: float = 300.0
) -> dict:
    """{"terms": fit.LinkTerms, "link": the simulated link they make, "real": {algorithm:
    [seconds per size]}, "simulated": {...}}: the fastest repeat of each, the real ones on
    the wall clock (each rank should have a core: `world_size` <= the cores)."""
    args = (tuple(nbytes), repeats)
    return launch(_check_on_rank, world_size, args=args, timeout=timeout, backend=GLOO)[0]


def ratios(check: dict) -> dict[str, list[float]]:
    """{algorithm: [simulated / real per size]}."""
    return {
        name: [s / r for s, r in zip(check["simulated"][name], real, strict=True)]
        for name, real in check["real"].items()
    }


def _check_on_rank(nbytes: tuple, repeats: int) -> dict:
    """Rank 0's bar counts the rounds after the fit (every algorithm once on each clock)."""
    with progress.bar(len(nbytes) * (repeats + 1), "simulator against the link", "round") as bar:
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
