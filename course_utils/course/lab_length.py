"""How long a notebook's lab is: what a learner reads, the verdicts they are shown, the
exercises they write, in its core and in "Going further".

A notebook's core is everything before its "Going further" heading, exercises and summary
included; it should fit a 90-minute lab for someone new to the topic: about 1,800 words
and 12 verdicts at most (design.md, section 4). "Going further" holds at most about 1,000
words and 6 verdicts. Prose is the markdown cells and the markdown a cell displays, fenced
code left out; a verdict line is one that `checks.verdict` printed in the stored outputs
("? not judged" included), an unsolved exercise's "✗ not solved yet" aside, which counts
an exercise instead.

The README's minutes for a core are an estimate, stated with the course map: reading at
100 words a minute, 2 minutes per verdict (its numbers and chart, read and understood), 10
minutes per checked exercise, and the notebook's run time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..core.checks import FAIL, NOT_JUDGED, NOT_SOLVED, PASS
from .exercise_cells import FURTHER

CORE_LIMITS = (1800, 12)  # (words, verdicts)
FURTHER_LIMITS = (1000, 6)
WORDS_PER_MINUTE, MINUTES_PER_VERDICT, MINUTES_PER_EXERCISE = 100, 2, 10
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
WORD = re.compile(r"\w[\w'’-]*")


@dataclass
class Part:
    words: int = 0
    verdicts: int = 0
    exercises: int = 0

    def within(self, limits: tuple[int, int]) -> bool:
        return self.words <= limits[0] and self.verdicts <= limits[1]


def stdout_lines(cell) -> list[str]:
    """The lines a code cell printed, where `checks.verdict` puts its verdicts."""
    if cell.get("cell_type") != "code":
        return []
    lines = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            lines += output.get("text", "").splitlines()
    return lines


def _words(markdown: str) -> int:
    return len(WORD.findall(FENCE.sub("", markdown)))


def budget(notebook: Path) -> tuple[Part, Part]:
    """(core, going further) of a stored notebook."""
    core, further = Part(), Part()
    part = core
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type == "markdown":
            if FURTHER.search(cell.source):
                part = further
            part.words += _words(cell.source)
            continue
        for line in stdout_lines(cell):
            unsolved = line == f"{FAIL} {NOT_SOLVED}"
            part.exercises += unsolved
            part.verdicts += line.startswith((f"{PASS} ", f"{FAIL} ", NOT_JUDGED)) and not unsolved
        for output in cell.get("outputs", []):
            part.words += _words(output.get("data", {}).get("text/markdown", ""))
    return core, further


def core_minutes(notebook: Path, run_seconds: float = 0.0) -> int:
    """The estimate of the module's docstring, to the nearest 5 minutes."""
    core, _ = budget(notebook)
    minutes = (
        core.words / WORDS_PER_MINUTE
        + core.verdicts * MINUTES_PER_VERDICT
        + core.exercises * MINUTES_PER_EXERCISE
        + run_seconds / 60
    )
    return 5 * round(minutes / 5)
