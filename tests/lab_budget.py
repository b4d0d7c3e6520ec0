"""How long each notebook's lab is: its words of prose and its verdict lines, in the core
and in "Going further".

    python tests/lab_budget.py [notebooks/NN_name.ipynb ...]

A notebook's core is everything before its "Going further" heading, exercises and summary
included; it should fit a 90-minute lab for someone new to the topic: about 1,800 words
and 12 verdicts at most (`../shared/design.md`, section 4). "Going further" holds at most
about 1,000 words and 6 verdicts. Prose is the markdown cells and the markdown a cell
displays, fenced code left out; a verdict line is one that `checks.verdict` printed in the
stored outputs ("? not judged" included), an unsolved exercise's "✗ not solved yet" aside.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

CORE_LIMITS = (1800, 12)  # (words, verdicts)
FURTHER_LIMITS = (1000, 6)
FURTHER = re.compile(r"^#+\s*Going further", re.MULTILINE)
VERDICT = re.compile(r"^(✓ |✗ |\? not judged)")
NOT_SOLVED = "✗ not solved yet"
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
WORD = re.compile(r"\w[\w'’-]*")


@dataclass
class Part:
    words: int = 0
    verdicts: int = 0

    def within(self, limits: tuple[int, int]) -> bool:
        return self.words <= limits[0] and self.verdicts <= limits[1]


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def _words(markdown: str) -> int:
    return len(WORD.findall(FENCE.sub("", markdown)))


def _verdicts(cell: dict) -> int:
    lines = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            lines += _text(out.get("text", "")).splitlines()
        else:
            lines += _text(out.get("data", {}).get("text/plain", "")).splitlines()
    return sum(1 for line in lines if VERDICT.match(line) and not line.startswith(NOT_SOLVED))


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
            part.verdicts += _verdicts(cell)
            for out in cell.get("outputs", []):
                part.words += _words(_text(out.get("data", {}).get("text/markdown", "")))
    return core, further


def table(notebooks: list[Path]) -> str:
    rows = [
        f"{'notebook':40} {'core words':>10} {'verdicts':>8} {'further words':>13} "
        f"{'verdicts':>8}  within"
    ]
    for path in notebooks:
        core, further = budget(path)
        ok = core.within(CORE_LIMITS) and further.within(FURTHER_LIMITS)
        rows.append(
            f"{path.name:40} {core.words:10} {core.verdicts:8} {further.words:13} "
            f"{further.verdicts:8}  {'yes' if ok else 'no'}"
        )
    words, verdicts = CORE_LIMITS
    rows.append(
        f"limits: core {words} words and {verdicts} verdicts; going further "
        f"{FURTHER_LIMITS[0]} words and {FURTHER_LIMITS[1]} verdicts"
    )
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parent.parent / "notebooks"
    notebooks = [Path(a) for a in argv] or sorted(here.glob("[0-9][0-9]_*.ipynb"))
    print(table(notebooks))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
