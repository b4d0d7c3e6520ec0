"""Lay the course out for Sphinx (`make site`): the executed notebooks as they are committed,
and pages cut from the README, so that the website says what the repository says.

Run with the site's own Python: it copies and cuts text only, imports nothing from the
course and executes no notebook.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = {  # page: the README heading (level 2) it is cut from
    "setup": "Quick start",
    "profiles": "Profiles: laptop or GPU box",
    "machines": "Several processes, GPUs and machines",
}


def sections(readme: str) -> dict[str, str]:
    """The README's text under each level-2 heading; what comes before the first, under ""."""
    parts = re.split(r"^## (.+)$", readme, flags=re.MULTILINE)
    return {"": parts[0], **dict(zip(parts[1::2], parts[2::2], strict=True))}


def for_the_site(text: str) -> str:
    """Links and images as the site lays them out: each notebook is a page beside this one,
    and its picture is under images/ (the README links only notebooks and their images)."""
    return text.replace("](notebooks/", "](").replace('src="notebooks/images/', 'src="images/')


def prepare(out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(ROOT / "site", out, ignore=shutil.ignore_patterns("prepare.py", "*.pyc"))
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for name in notebooks:
        shutil.copy(ROOT / "notebooks" / name, out / name)
    shutil.copytree(ROOT / "notebooks" / "images", out / "extra" / "images")
    readme = sections((ROOT / "README.md").read_text())
    text = {k: for_the_site(v) for k, v in readme.items()}
    intro = text[""].split("\n", 1)[1]  # the repository's name is not the site's title
    toc = "\n".join(Path(n).stem for n in notebooks)
    (out / "index.md").write_text(
        f"# Parallel training, hands on\n{intro}\n## Course map\n{text['Course map']}\n"
        f"```{{toctree}}\n:caption: Notebooks\n:maxdepth: 1\n\n{toc}\n```\n\n"
        f"```{{toctree}}\n:caption: Running the course\n:maxdepth: 1\n\n"
        + "\n".join(PAGES)
        + "\n```\n"
    )
    for page, heading in PAGES.items():
        (out / f"{page}.md").write_text(f"# {heading}\n{text[heading]}")


if __name__ == "__main__":
    prepare(Path(sys.argv[1]))
