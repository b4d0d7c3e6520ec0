"""Where the course's notebooks are and which ones a command line names.

Both the runner and the course map need this, so it sits apart from either of them.
"""

from __future__ import annotations

from pathlib import Path

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"


def course_notebooks(directory: Path = NOTEBOOK_DIR) -> list[Path]:
    """The course's notebooks in teaching order (their names start with the number)."""
    return sorted(p for p in directory.glob("[0-9][0-9]_*.ipynb"))


def resolve(names: list[str], directory: Path = NOTEBOOK_DIR) -> list[Path]:
    """Paths for names given on the command line: a path, a file name, or its number ('03')."""
    if not names:
        return course_notebooks(directory)
    found = []
    for name in names:
        path = Path(name)
        if path.exists():
            found.append(path)
            continue
        matches = [p for p in course_notebooks(directory) if p.name.startswith(name)]
        if len(matches) != 1:
            known = ", ".join(p.name for p in course_notebooks(directory))
            raise FileNotFoundError(f"no single notebook matches {name!r}; known: {known}.")
        found.append(matches[0])
    return found
