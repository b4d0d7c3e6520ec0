"""The README's course map, made from the notebooks themselves.

Each row is a notebook: its title (the first heading), what it shows (the notebook's
`course.shows` metadata), its key chart (the first picture of the cell tagged
`key-chart`, saved to notebooks/images/), what its ranks run on with the `gpu` profile
(`core.backends`), the minutes its core takes a learner (`lab_length`'s estimate) and how
long it took to run in each profile, as measured by `python -m course_utils run --write`
and kept in notebooks/timings.json.
Nothing in the table is typed by hand, so it cannot drift from the course.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import nbformat

from ..core.backends import map_column
from .lab_length import core_minutes
from .notebook_files import course_notebooks

KEY_CHART_TAG = "key-chart"
START = "<!-- course-map:start (made by python -m course_utils run --write) -->"
END = "<!-- course-map:end -->"
PROFILES = ("cpu", "gpu")


def images_dir(notebook_dir: Path) -> Path:
    return notebook_dir / "images"


def timings_path(notebook_dir: Path) -> Path:
    return notebook_dir / "timings.json"


def save_key_chart(nb, path: Path) -> Path | None:
    """Write the key chart of an executed notebook next to it, as images/<name>.png."""
    for cell in nb.cells:
        if KEY_CHART_TAG not in cell.get("metadata", {}).get("tags", []):
            continue
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png:
                target = images_dir(path.parent) / f"{path.stem}.png"
                target.parent.mkdir(exist_ok=True)
                target.write_bytes(base64.b64decode(png))
                return target
    return None


def load_timings(notebook_dir: Path) -> dict:
    path = timings_path(notebook_dir)
    return json.loads(path.read_text()) if path.exists() else {}


def record_timings(notebook_dir: Path, profile: str, seconds: dict[str, float]) -> None:
    """Keep the measured seconds per notebook for one profile (others are left as they were)."""
    timings = load_timings(notebook_dir)
    timings.setdefault(profile, {}).update({k: round(v) for k, v in seconds.items()})
    timings[profile] = dict(sorted(timings[profile].items()))
    timings_path(notebook_dir).write_text(json.dumps(timings, indent=1, sort_keys=True) + "\n")


def _title(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^#\s+(.+)$", cell.source, re.M)
            if match:
                return match.group(1).strip()
    return ""


def render(notebook_dir: Path, readme_dir: Path) -> str:
    """The course map as a Markdown table, links relative to the README."""
    timings = load_timings(notebook_dir)
    rows = [
        "| notebook | what it shows | key chart | ranks (gpu profile) | core | cpu | gpu |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in course_notebooks(notebook_dir):
        nb = nbformat.read(path, as_version=4)
        link = path.relative_to(readme_dir).as_posix()
        shows = nb.metadata.get("course", {}).get("shows", "")
        image = images_dir(notebook_dir) / f"{path.stem}.png"
        src = image.relative_to(readme_dir).as_posix()
        chart = f'<img src="{src}" width="240">' if image.exists() else "—"
        times = [_seconds(timings.get(p, {}).get(path.name)) for p in PROFILES]
        ranks = map_column(path.name[:2])
        ran = timings.get("cpu", {}).get(path.name)
        core = f"{core_minutes(path, ran if isinstance(ran, int | float) else 0)} min"
        rows.append(
            f"| [{_title(nb)}]({link}) | {shows} | {chart} | {ranks} | {core} | {times[0]} "
            f"| {times[1]} |"
        )
    return "\n".join(rows)


def _seconds(value) -> str:
    """A run's seconds; a note (a partial run on borrowed hardware, dated) as it was written."""
    if isinstance(value, str):
        return value
    return "not run yet" if value is None else f"{value} s"


def update_readme(readme: Path, notebook_dir: Path) -> bool:
    """Replace the table between the README's markers; True if the README changed."""
    text = readme.read_text()
    if START not in text or END not in text:
        raise ValueError(f"{readme} has no course-map markers ({START} ... {END}).")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{render(notebook_dir, readme.parent)}\n{END}{tail}"
    if new != text:
        readme.write_text(new)
    return new != text
