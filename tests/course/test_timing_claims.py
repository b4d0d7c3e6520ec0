"""Every timing verdict declares its clock and what it compares with, and fails somewhere.

A declaration is not taken on trust: the test it names must exist and show the verdict's
✗ on a broken variant, and a verdict whose line names a clock must be declared.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import course_utils
from course_utils.core import timing_claims

PACKAGE = Path(course_utils.__file__).parent
TESTS = Path(__file__).parents[1]
CLOCK_IN_LINE = re.compile(r"\b(real|simulated) (clock|link)\b")


def _chapter_modules() -> list[str]:
    return sorted(
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py"
    )


def _declared() -> dict:
    for module in _chapter_modules():
        importlib.import_module(module)
    return dict(timing_claims.DECLARED)


def _functions():
    """(dotted name, AST) of every module-level function of the chapters."""
    for module in _chapter_modules():
        path = PACKAGE.parent / Path(*module.split(".")).with_suffix(".py")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef):
                yield f"{module}.{node.name}", node


def _functions_whose_line_names_a_clock() -> set[str]:
    """Module-level functions that build a verdict whose text says 'real clock',
    'simulated clock' or 'simulated link' (string literals inside a `verdict(...)` call)."""
    found = set()
    for name, node in _functions():
        for call in ast.walk(node):
            if not (isinstance(call, ast.Call) and getattr(call.func, "id", "") == "verdict"):
                continue
            texts = [
                c.value
                for c in ast.walk(call)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            ]
            if any(CLOCK_IN_LINE.search(t) for t in texts) or any(
                "_clock(" in ast.unparse(a) or a.__class__ is ast.JoinedStr
                and "clock" in ast.unparse(a) and "{clock}" in ast.unparse(a)
                for a in call.args
            ):  # fmt: skip
                found.add(name)
    return found


def test_every_declaration_names_a_clock_a_comparison_and_a_test_where_it_fails():
    declared = _declared()
    assert len(declared) >= 20
    test_names = {
        node.name
        for path in TESTS.rglob("test_*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
    }
    for name, claim in declared.items():
        assert claim.clock in timing_claims.CLOCKS, name
        assert claim.against in timing_claims.AGAINST, name
        assert claim.fails_in in test_names, f"{name}: no test {claim.fails_in!r} under tests/"


def test_every_verdict_whose_line_names_a_clock_is_declared():
    declared = _declared()
    undeclared = _functions_whose_line_names_a_clock() - set(declared)
    assert not undeclared, f"declare these with core.timing_claims.timing_claim: {undeclared}"


def test_a_verdict_that_can_be_not_judged_names_the_real_clock_and_is_declared():
    """`verdict(..., machine)` says "not judged" when other programs took the cores: its
    time is on the real clock, and its line must say so (four of 01's did not). A helper
    handed its line by its caller (`ddp.verdicts.slower_than`) leaves that to the caller."""
    declared = _declared()
    named = _functions_whose_line_names_a_clock()
    for name, node in _functions():
        if any(
            isinstance(call, ast.Call)
            and getattr(call.func, "id", "") == "verdict"
            and len(call.args) + len(call.keywords) == 3
            and not isinstance(call.args[1], ast.Name)
            for call in ast.walk(node)
        ):
            assert name in declared, name
            assert name in named or declared[name].clock == "named by its rows", name


def test_a_simulated_time_against_the_formula_it_was_charged_cannot_be_declared():
    with pytest.raises(ValueError, match="prediction"):
        timing_claims.timing_claim("simulated", "the formula the simulator charged", "t")
    with pytest.raises(ValueError, match="unknown clock"):
        timing_claims.timing_claim("wall", "measurement", "t")
