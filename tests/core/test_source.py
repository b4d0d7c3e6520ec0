"""`show` prints the code that runs: the function's own source, found where it lives."""

from __future__ import annotations

import inspect

import pytest

from course_utils.core.source import show
from course_utils.parallel import allreduce


def test_show_prints_the_functions_own_source_with_where_it_lives(capsys):
    show(allreduce.ring_reduce_scatter, allreduce.ring_allreduce)
    out = capsys.readouterr().out
    assert out.startswith("# course_utils.parallel.allreduce.ring_reduce_scatter\n")
    assert inspect.getsource(allreduce.ring_allreduce).rstrip() in out
    assert "# course_utils.parallel.allreduce.ring_allreduce\n" in out


def test_show_refuses_what_has_no_source():
    with pytest.raises(TypeError):
        show(len)
