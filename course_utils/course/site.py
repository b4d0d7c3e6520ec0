"""The course as a website (`make site`): laid out here for Sphinx and MyST-NB, from the
executed notebooks as they are committed and pages cut from the README, so that the website
says what the repository says.

Run as a script with the site's own Python (build/site-venv): it copies and cuts text only,
imports nothing from the course and executes no notebook. The notebooks are shown as
committed, executed with the cpu profile: nothing runs, so the site builds offline.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = {  # page: the README heading (level 2) it is cut from
    "setup": "Quick start",
    "profiles": "Profiles: laptop or GPU box",
    "machines": "Several processes, GPUs and machines",
}


CONF = """\
project = "Parallel training, hands on"
author = "parallel-training-course"
extensions = ["myst_nb"]
nb_execution_mode = "off"  # the stored outputs are the ones every reader sees
nb_merge_streams = True  # a cell's stdout in one block, as JupyterLab shows it
myst_enable_extensions = ["dollarmath", "colon_fence"]
html_theme = "furo"  # installed from the package index with Sphinx: nothing fetched later
html_title = project
html_extra_path = ["extra"]  # the course map's pictures, which the README shows as raw HTML
exclude_patterns = ["_build", "extra"]
suppress_warnings = ["myst.header", "misc.highlighting_failure"]  # headings below level 2; a
# traceback with a backquote that the lexer retries, relaxed, and shows all the same
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_show_copyright = False
"""
CSS = """\
/* The course map's pictures keep a readable size, and no column shrinks to a word a
   line; the wide table scrolls instead. */
table.docutils img { min-width: 200px; }
table.docutils td { vertical-align: top; min-width: 7em; }
"""


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
    (out / "_static").mkdir(parents=True)
    (out / "conf.py").write_text(CONF)
    (out / "_static" / "course.css").write_text(CSS)
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
