"""`make site`'s layout (`course.site`), without Sphinx: every notebook becomes a page named
after its file, the README's sections become pages, and their links point where the site
puts notebooks and pictures. (Building the site itself is `make site-test`'s.)"""

from __future__ import annotations

from pathlib import Path

from course_utils.course import site as prepare

REPO = Path(__file__).resolve().parents[2]


def test_every_notebook_and_readme_section_becomes_a_page(tmp_path):
    prepare.prepare(tmp_path / "src")
    notebooks = sorted(p.name for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(notebooks) == 12
    assert all((tmp_path / "src" / name).is_file() for name in notebooks)
    index = (tmp_path / "src" / "index.md").read_text()
    assert all(f"\n{Path(name).stem}\n" in index for name in notebooks)  # in the toctree
    assert all(f"]({name})" in index for name in notebooks)  # the course map's links
    assert "notebooks/" not in index and 'src="images/' in index
    for page, heading in prepare.PAGES.items():
        text = (tmp_path / "src" / f"{page}.md").read_text()
        assert text.startswith(f"# {heading}\n") and len(text) > 200
    pictures = {p.name for p in (tmp_path / "src" / "extra" / "images").iterdir()}
    assert {f"{Path(name).stem}.png" for name in notebooks} <= pictures
    assert (tmp_path / "src" / "conf.py").is_file()


def test_sections_split_at_level_two_headings_only():
    text = "# Title\nintro\n## One\na\n### Sub\nb\n## Two\nc\n"
    assert prepare.sections(text) == {
        "": "# Title\nintro\n",
        "One": "\na\n### Sub\nb\n",
        "Two": "\nc\n",
    }
