"""The network simulator: N ranks on a few cores that wait like N machines on a network.

The data moves through gloo for real and every message follows the real dependencies of
the code that sent it, but each one is charged alpha + n/beta on per-rank virtual clocks
(`clock`), through the course's send paths (`wire`) and the DDP hook (`hook`). The fabric
it stands for is named (`fabric`: presets from public figures, or `this-machine`, fitted
on the real link here by `fit`). A time on it is on the *simulated* clock; the real one is
the wall clock with a core per rank. Chapter 05's `bench simulator` checks the one thing
that makes it trustworthy: set to this machine's fitted terms, it gives the real times.
"""

from __future__ import annotations

from . import (
    fit,  # noqa: F401  - makes `this-machine` a link that `fabric.parse` knows
    wire,  # noqa: F401  - a launch inside `recorder.recording()` records on its ranks
)
