"""Which notebooks `make notebooks` runs two at a time, and which alone, after the others.

A verdict timed on the real clock (or real compute beside a simulated link) measures what
the cores did: beside another notebook it says "not judged", which the sanitizer reads as
its stored ✓ (tests/nbval_sanitize.cfg), so CI would never judge it. A notebook with such
a verdict line in its stored outputs runs alone. The others' verdicts read seeds, bytes,
the simulator's clocks and one thread's CPU time, which hold beside a CPU hog (`make
stress`). They share the two cores in the order whose play-out finishes soonest (by
notebooks/timings.json; each of pytest-xdist's two workers takes the next notebook as it
finishes one), longest first among orders that tie: 00, 02, 03, 07, 08, 10 and 11 took
203 s two at a time, where one at a time they took 274 s. Longest first alone left one
worker 16 s of the stored 322 after the other. A notebook that gains a real-clock verdict
moves to the alone group once its outputs are stored, with no list to keep in step.

Usage: python tests/notebook_groups.py shared|alone
"""

from __future__ import annotations

import json
import re
import sys
from itertools import permutations
from pathlib import Path

NOTEBOOKS = Path(__file__).parents[1] / "notebooks"
# ✓, ✗ or "? not judged" (core.checks), on the real clock or real compute; except on one
# thread's CPU time (08's checkpointing), which another program does not lengthen
REAL_CLOCK_VERDICT = re.compile(
    r"^[✓✗?] .*(\breal (clock|compute)\b(?! \(one thread's CPU time\))|not judged)"
)


def printed_lines(notebook: Path) -> list[str]:
    """What the notebook's code cells printed, where verdicts go: the lines
    `course_utils.course.lab_length.stdout_lines` reads (not imported here, since importing
    it takes torch and nbformat, 3.7 s, before each of the two phases)."""
    lines = []
    for cell in json.loads(notebook.read_text())["cells"]:
        for output in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            if output.get("output_type") == "stream" and output.get("name") == "stdout":
                lines += "".join(output.get("text", "")).splitlines()
    return lines


def times_the_real_clock(notebook: Path) -> bool:
    return any(REAL_CLOCK_VERDICT.search(line) for line in printed_lines(notebook))


def groups(folder: Path = NOTEBOOKS) -> dict[str, list[Path]]:
    notebooks = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    alone = [nb for nb in notebooks if times_the_real_clock(nb)]
    seconds = json.loads((folder / "timings.json").read_text())["cpu"]
    shared = sorted(
        (nb for nb in notebooks if nb not in alone), key=lambda nb: -seconds.get(nb.name, 0)
    )
    if len(shared) <= 8:  # 8! orders at most
        shared = list(min(permutations(shared), key=lambda order: _two_at_a_time(order, seconds)))
    return {"shared": shared, "alone": alone}


def _two_at_a_time(order, seconds: dict[str, float]) -> float:
    """When the last of `order` ends, each notebook going to whichever worker is free first."""
    ends = [0.0, 0.0]
    for nb in order:
        ends[ends.index(min(ends))] += seconds.get(nb.name, 0)
    return max(ends)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("shared", "alone"):
        sys.exit("usage: python tests/notebook_groups.py shared|alone")
    group = groups()[sys.argv[1]]
    if not group:  # pytest given no path would run tests/ under nbval
        sys.exit(f"no notebook is in the {sys.argv[1]} group: run the other group's command")
    print(" ".join(str(nb.relative_to(NOTEBOOKS.parent)) for nb in group))
