"""`python -m course_utils doctor | bench launch | data` as a learner or CI would call them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from course_utils import __main__ as cli


def run(*args, env=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "course_utils", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_doctor_reports_versions_backends_gpus_profile_data():
    out = run("doctor")
    assert out.returncode == 0, out.stderr
    for word in ("python", "torch", "torchvision", "backends", "gloo", "gpus", "profile", "data."):
        assert word in out.stdout
    assert "2 gloo ranks, all_reduce -> [1, 1] ok" in out.stdout


def test_doctor_json_says_how_ranks_start_and_whether_the_kernel_can_fork():
    out = run("doctor", "--json")  # a fresh process: a test here may have marked CUDA started
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout)
    assert facts["start_method"] == {"gloo": "fork", "nccl": "spawn"}
    assert facts["gpus"]["count"] >= 0 and facts["gpus"]["counted_by"]
    assert facts["forked_child_in_bad_fork"] is False and facts["problems"] == []
    assert facts["profile"]["name"] in ("cpu", "gpu")


def test_doctor_fails_with_a_clear_message(monkeypatch, capsys):
    from course_utils.course import doctor

    monkeypatch.setenv("COURSE_PROFILE", "nonsense")
    monkeypatch.setattr(doctor, "check_launch", lambda: ("2 gloo ranks ok", []))
    assert cli.main(["doctor"]) == 1
    err = capsys.readouterr().err
    assert "The course cannot run as it is" in err
    assert "valid profiles: cpu, gpu" in err


def test_doctor_fails_when_ranks_cannot_start(monkeypatch, capsys):
    from course_utils.course import doctor

    broken = ("BROKEN", ["two gloo ranks could not all_reduce"])
    monkeypatch.setattr(doctor, "check_launch", lambda: broken)
    assert cli.main(["doctor"]) == 1
    assert "could not all_reduce" in capsys.readouterr().err


def test_bench_launch_prints_one_json_object(capsys):
    assert cli.main(["bench", "launch", "--world-size", "2", "--repeats", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["world_size"] == 2 and result["seconds_median"] > 0


class _TalkativeBench:
    """A bench that says something on the way, as one that finds the machine busy does."""

    @staticmethod
    def run(args):
        print("busy machine: 1.6 of 2 cores taken by others; measuring again")
        return {"seconds": 1.0}


def test_bench_json_keeps_stdout_for_the_json_alone(capsys):
    from argparse import Namespace

    assert cli.bench(Namespace(json=True, bench_module=_TalkativeBench)) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == {"seconds": 1.0}
    assert "busy machine" in out.err


def test_data_mnist1d_prepares_the_cache(tmp_path, monkeypatch, capsys):
    """The command's part: the cache made where the course reads it. Generating the 10,000
    signals takes 13 s of CPU, and tests/core/test_data.py generates real ones."""
    import numpy as np

    from course_utils.core import data

    def signals(num_samples, seed):
        n_test = num_samples // 5
        x, y = np.zeros((num_samples - n_test, 40), np.float32), np.zeros(num_samples - n_test)
        return {"x": x, "y": y, "x_test": x[:n_test], "y_test": y[:n_test]}

    monkeypatch.setattr(data, "DATA_DIR", tmp_path)
    monkeypatch.setattr(data, "_generate_mnist1d", signals)
    assert cli.main(["data", "mnist1d"]) == 0
    assert list(tmp_path.glob("mnist1d_n10000_*.npz"))
    assert json.loads(capsys.readouterr().out.split("\n", 1)[1])["root"] == str(tmp_path)


def test_unknown_command_is_refused():
    with pytest.raises(SystemExit):
        cli.main(["frobnicate"])
