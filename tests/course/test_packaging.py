"""The two commands and the two environment files stay in step."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONDA_TO_PIP = {"pytorch": "torch"}
NOT_PACKAGES = {"python", "pip"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _bound(requirement: str) -> str:
    return requirement.strip()[len(_name(requirement)) :].replace(" ", "")


def test_environment_yml_lists_the_same_packages_as_pyproject_with_the_same_bounds():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + sum(project["optional-dependencies"].values(), [])
    pip_bounds = {_name(r): _bound(r) for r in requirements}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda_bounds = {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            conda_bounds |= {_name(r): _bound(r) for r in dep["pip"] if not r.startswith("-")}
        else:
            conda_bounds[CONDA_TO_PIP.get(_name(dep), _name(dep))] = _bound(dep)
    for name in NOT_PACKAGES:
        conda_bounds.pop(name)
    assert conda_bounds == pip_bounds


def test_dependencies_are_lower_bounds_only():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for req in project["dependencies"]:
        assert "==" not in req and "<" not in req, req


def test_readme_gives_the_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M)
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^lab:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


def test_top_level_is_the_documented_layout():
    expected = {
        "notebooks", "course_utils", "data", "environment.yml", "tests", "README.md",
        "pyproject.toml", "Makefile",
    }  # fmt: skip
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    top = {f.split("/")[0] for f in files if not f.startswith(".")}
    assert top == expected


def test_make_lab_installs_settings_that_save_widget_state():
    """A saved notebook reopened with a new kernel shows each widget's picture only if
    JupyterLab saved the widget state: `make lab` installs that setting, under a key and
    value the installed widget manager's schema accepts."""
    import json
    import sys

    settings = json.loads((ROOT / "course_utils" / "course" / "lab_settings.json").read_text())
    plugin = "@jupyter-widgets/jupyterlab-manager:plugin"
    assert settings == {plugin: {"saveState": True}}
    schema = Path(sys.prefix, "share/jupyter/labextensions/@jupyter-widgets/jupyterlab-manager",
                  "schemas/@jupyter-widgets/jupyterlab-manager/plugin.json")  # fmt: skip
    properties = json.loads(schema.read_text())["properties"]
    assert properties["saveState"]["type"] == "boolean"
    dry = subprocess.run(
        ["make", "-n", "-W", "course_utils/course/lab_settings.json", "lab"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "share/jupyter/lab/settings/overrides.json" in dry
