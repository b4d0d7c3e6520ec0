"""`python -m course_utils plan`: JSON out, a table without --json, presets named on a typo."""

from __future__ import annotations

import json

from course_utils.__main__ import main


def test_json_has_the_pick_layouts_and_rejected(capsys):
    assert main(["plan", "--json", "llama3-8b", "2x8:h100"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"pick", "layouts", "rejected"}
    assert out["pick"]["name"] == out["layouts"][0]["name"]
    assert all("why" in r for r in out["rejected"])


def test_overrides_reach_the_cluster(capsys):
    assert main(["plan", "--json", "course", "1x4:cpu", "--tflops", "1", "--memory-gb", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cluster"] == "1x4:cpu" and out["pick"]["dp"] * out["pick"]["tp"] <= 4


def test_table_without_json(capsys):
    assert main(["plan", "llama3-8b", "1x8:h100", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "the pick:" in out and len(out.splitlines()) == 2 + 3 + 1


def test_nothing_fits_exits_nonzero(capsys):
    assert main(["plan", "llama3-70b", "1x1:h100"]) == 1
    assert "nothing fits" in capsys.readouterr().out


def test_unknown_model_names_the_presets(capsys):
    assert main(["plan", "gpt", "8x8:h100"]) == 1
    assert "course, llama3-8b, llama3-70b" in capsys.readouterr().err


def test_unknown_cluster_names_the_syntax(capsys):
    assert main(["plan", "course", "8x8:tpu"]) == 1
    assert "NODESxGPUS:KIND" in capsys.readouterr().err
