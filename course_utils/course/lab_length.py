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

import json
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CORE_LIMITS", "FURTHER_LIMITS", "Part", "budget", "core_minutes"]

CORE_LIMITS = (1800, 12)  # (words, verdicts)
FURTHER_LIMITS = (1000, 6)
WORDS_PER_MINUTE, MINUTES_PER_VERDICT, MINUTES_PER_EXERCISE = 100, 2, 10
FURTHER = re.compile(r"^#+\s*Going further", re.MULTILINE)
VERDICT = re.compile(r"^(✓ |✗ |\? not judged)")
NOT_SOLVED = "✗ not solved yet"
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
WORD = re.compile(r"\w[\w'’-]*")


@dataclass
class Part:
    words: int = 0
    verdicts: int = 0
    exercises: int = 0

    def within(self, limits: tuple[int, int]) -> bool:
        return self.words <= limits[0] and self.verdicts <= limits[1]


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def _words(markdown: str) -> int:
    return len(WORD.findall(FENCE.sub("", markdown)))


def _lines(cell: dict) -> list[str]:
    lines = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            lines += _text(out.get("text", "")).splitlines()
        else:
            lines += _text(out.get("data", {}).get("text/plain", "")).splitlines()
    return lines


def budget(notebook: Path) -> tuple[Part, Part]:
    """(core, going further) of a stored notebook."""
    core, further = Part(), Part()
    part = core
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        source = _text(cell["source"])
        if cell["cell_type"] == "markdown":
            if FURTHER.search(source):
                part = further
            part.words += _words(source)
        elif cell["cell_type"] == "code":
            for line in _lines(cell):
                part.exercises += line.startswith(NOT_SOLVED)
                part.verdicts += bool(VERDICT.match(line)) and not line.startswith(NOT_SOLVED)
            for out in cell.get("outputs", []):
                part.words += _words(_text(out.get("data", {}).get("text/markdown", "")))
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
