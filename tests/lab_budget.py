"""How long each notebook's lab is: its words of prose and its verdict lines, in the core
and in "Going further" (`course_utils.course.lab_length` says what counts).

    python tests/lab_budget.py [notebooks/NN_name.ipynb ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

from course_utils.course.lab_length import CORE_LIMITS, FURTHER_LIMITS, budget


def table(notebooks: list[Path]) -> str:
    rows = [
        f"{'notebook':40} {'core words':>10} {'verdicts':>8} {'exercises':>9} "
        f"{'further words':>13} {'verdicts':>8}  within"
    ]
    for path in notebooks:
        core, further = budget(path)
        ok = core.within(CORE_LIMITS) and further.within(FURTHER_LIMITS)
        rows.append(
            f"{path.name:40} {core.words:10} {core.verdicts:8} {core.exercises:9} "
            f"{further.words:13} {further.verdicts:8}  {'yes' if ok else 'no'}"
        )
    rows.append(
        f"limits: core {CORE_LIMITS[0]} words and {CORE_LIMITS[1]} verdicts; going further "
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
