"""What a verdict printed, for the wrong-world tests: each check is one verdict, called as the
notebook calls it, and must print exactly one line, ✗ for the wrong world, ✓ for the right."""

from __future__ import annotations


def _one_line(capsys, check):
    capsys.readouterr()  # what the runs printed before
    result = check()
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out
    return result, out


def fails(capsys, check):
    """`check()`'s verdict, asserted falsy and printed as one ✗ line."""
    result, line = _one_line(capsys, check)
    assert not result and line.startswith("✗ "), line
    return result


def holds(capsys, check):
    """`check()`'s verdict, asserted truthy and printed as one ✓ line: the right world's."""
    result, line = _one_line(capsys, check)
    assert result and line.startswith("✓ "), line
    return result
