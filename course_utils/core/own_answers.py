"""The course's own answers to its exercises, refused while a checker runs the learner's code.

The course needs a working ring, gradient averaging or curve distance for its own
experiments, so those functions ship in the package; but a learner who hands one of them
to a checker (or calls it from inside their function) has not solved the exercise. Each
such function is marked with `own_answer(name)`; a checker rejects a marked function
passed to it at once, and runs the learner's function inside `refusing()`, where calling
a marked function raises `OwnAnswerUsed` with the line the checker then prints.
"""

from __future__ import annotations

import contextlib
import functools

from .checks import attempt
from .errors import CourseError

__all__ = [
    "OwnAnswerUsed", "Refused", "Refusing", "attempt_refusing", "from_launch", "message",
    "own_answer", "own_answer_name", "refusing",
]  # fmt: skip

_refusing = 0  # nesting depth; module state, so a forked rank inherits it


class OwnAnswerUsed(CourseError):
    """The learner's function called the course's own implementation of the exercise."""


def message(name: str) -> str:
    """The verdict text for an exercise answered with the course's own code."""
    return f"this is the course's own {name}: write yours"


def own_answer(name: str):
    """Mark a course function as the answer to an exercise: refused inside `refusing()`."""

    def mark(fn):
        @functools.wraps(fn)
        def guarded(*args, **kwargs):
            if _refusing:
                raise OwnAnswerUsed(message(name))
            return fn(*args, **kwargs)

        guarded.own_answer = name
        return guarded

    return mark


def own_answer_name(fn) -> str | None:
    """The exercise `fn` is the course's own answer to, if it is one (else None)."""
    while fn is not None:
        name = getattr(fn, "own_answer", None)
        if isinstance(name, str):
            return name
        fn = getattr(fn, "func", None)  # a functools.partial of one
    return None


@contextlib.contextmanager
def refusing():
    """While the learner's function runs: every function marked `own_answer` raises."""
    global _refusing
    _refusing += 1
    try:
        yield
    finally:
        _refusing -= 1


class Refused(str):
    """A refusal's verdict text, returned in place of the learner's result."""


def attempt_refusing(fn, *args):
    """`checks.attempt(fn, *args)` inside `refusing()`: the learner's result, NOT_SOLVED, or
    the `Refused` text when `fn` called one of the course's own answers."""
    try:
        with refusing():
            return attempt(fn, *args)
    except OwnAnswerUsed as refused:
        return Refused(refused)


class Refusing:
    """The learner's function, called inside `refusing()`; picklable, so it can go to ranks
    started by spawn as well as by fork (where the refusal would not be inherited)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args, **kwargs):
        with refusing():
            return self.fn(*args, **kwargs)


def from_launch(error) -> str | None:
    """The refusal's text when a rank of a launch failed because it used the course's answer."""
    if getattr(error, "exc_type", None) != OwnAnswerUsed.__name__:
        return None
    for text in (str(getattr(error, "original", "") or ""), error.remote_traceback or ""):
        for line in text.splitlines():
            if "this is the course's own" in line:
                return line[line.index("this is the course's own") :].strip()
    return None
