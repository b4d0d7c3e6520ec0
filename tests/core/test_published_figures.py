"""Every figure the course quotes carries its source and where in it the figure stands."""

from __future__ import annotations

import pytest

from course_utils.core import published


def _figures() -> list[published.Figure]:
    found = [v for v in vars(published).values() if isinstance(v, published.Figure)]
    return found + list(published.MEGATRON_BYTES_PER_PARAMETER.values())


def test_every_figure_says_what_it_measures_who_published_it_and_where():
    figures = _figures()
    assert len(figures) == 6
    assert all(f.what and f.source and f.where and f.value > 0 for f in figures)


def test_the_reports_ddp_runs_give_its_ratio():
    assert published.naive_ddp_over_one_process() == pytest.approx(443 / 73)


def test_megatron_keeps_more_than_zeros_16_bytes_in_16_bit():
    table = published.MEGATRON_BYTES_PER_PARAMETER
    assert table["fp32", "fp32"].value == 16  # the same 4 + 4 + 8 as the course's autocast
    assert table["float16", "fp32"].value == 18 and table["float16", "float16"].value == 20
    assert all(f.source.startswith("https://docs.nvidia.com/") for f in table.values())
