"""Each chapter says where its ranks run, and what it says is what it does."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from course_utils.core import backends, profiles
from course_utils.course.notebook_files import course_notebooks

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_gloo_chapters_stay_on_gloo_and_the_others_follow_the_profile():
    assert backends.chapter_backend("nccl", "08") == "gloo"
    assert backends.chapter_backend("nccl", "04") == "nccl"
    assert backends.chapter_backend("gloo", "04") == "gloo"
    assert profiles.get("cpu").backend_for("06") == "gloo"


@pytest.mark.parametrize("chapter", sorted(backends.GLOO_ON_PURPOSE))
def test_a_gloo_chapter_never_says_nccl_and_gives_its_reason(chapter):
    line = backends.runs_on("nccl", chapter)
    assert "nccl" not in line.lower() and "gloo" in line
    assert backends.GLOO_ON_PURPOSE[chapter] in line
    assert backends.map_column(chapter) == "gloo (CPU)"


def test_a_profile_chapter_says_its_backend():
    assert backends.runs_on("nccl", "04") == "ranks: nccl (one GPU per rank)"
    assert backends.runs_on("gloo", "04") == "ranks: gloo on the CPU"
    assert backends.map_column("04") == "NCCL"


def test_every_gloo_chapter_notebook_prints_its_line_first():
    by_chapter = {path.name[:2]: path for path in course_notebooks(NOTEBOOKS)}
    for chapter in backends.GLOO_ON_PURPOSE:
        nb = nbformat.read(by_chapter[chapter], as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code")
        assert f'P.runs_on("{chapter}")' in first.source, chapter
        assert "P.backend}" not in first.source, chapter
