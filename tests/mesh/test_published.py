"""The published comparison: every case present, every source cited, nothing made up."""

from __future__ import annotations

import pytest

from course_utils.mesh.plan_model import cluster, model
from course_utils.mesh.planner import evaluate
from course_utils.mesh.published import CASES, PUBLISHED, comparison, table


@pytest.fixture(scope="module")
def rows():
    return comparison()


def test_every_case_has_a_row_and_every_published_layout_one(rows):
    assert {(r.model, r.gpus) for r in rows} == set(CASES)
    assert len(rows) == len(PUBLISHED) + sum(
        1 for case in CASES if not any((p.model, p.gpus) == case for p in PUBLISHED)
    )


def test_published_rows_cite_a_source_and_say_why(rows):
    for r in rows:
        if r.agree is None:
            assert r.published == "none found" and not r.source
        else:
            assert r.source.startswith("https://") and r.why


def test_published_layouts_are_costed_on_the_planners_terms():
    from dataclasses import replace

    for p in PUBLISHED:
        shaped = replace(model(p.model), global_batch=p.global_batch)
        costed = evaluate(shaped, cluster(f"{p.gpus // 8}x8:h100"), p.layout)
        assert costed.layout.gpus == p.gpus


def test_table_has_a_line_per_row(rows):
    text = table(rows)
    assert text.count("\n") == len(rows) + 1
    assert "| llama3-70b | 256 |" in text


def test_each_measured_layout_is_scored_against_its_reading():
    from course_utils.mesh.published import PUBLISHED, scored, scored_table

    rows = scored()
    assert len(rows) == sum(p.measured is not None for p in PUBLISHED) == 2
    eight = next(r for r in rows if r["layout"].startswith("llama3-8b"))
    assert eight["measured_gb"] == pytest.approx(67.0 * 2**30 / 1e9)  # 67.0 GiB, Table 3
    assert eight["measured_tokens"] == 5605 and eight["where"] == "Table 3, row FSDP"
    assert all(r["predicted_gb"] > 0 and r["predicted_tokens"] > 0 for r in rows)
    table = scored_table(rows)
    assert table.count("\n") == 1 + len(rows) and "Table 4, row 2D" in table
