"""The course's own answers to its exercises, refused while a checker runs the learner's code.

The course needs a working ring, gradient averaging or curve distance for its own
experiments, so those functions ship in the package; but a learner who hands one of them
to a checker (or calls it from inside their function) has not solved the exercise. Each
such function is marked with `own_answer(name)` or `mark`; a checker rejects a marked function
passed to it at once, and runs the learner's function inside `refusing()`, where calling
a marked function raises `OwnAnswerUsed` with the line the checker then prints.
"""

from __future__ import annotations

import contextlib
import sys

from .checks import NOT_SOLVED, Verdict, attempt, verdict
from .errors import CourseError

_ANSWERS: dict = {}  # a function's code object: the exercise it answers


class OwnAnswerUsed(CourseError):
    """The learner's function called the course's own implementation of the exercise."""


def message(name: str) -> str:
    """The verdict text for an exercise answered with the course's own code."""
    return f"this is the course's own {name}: write yours"


def mark(fn, name: str):
    """Mark `fn`, unchanged, as the course's answer to exercise `name`: refused inside
    `refusing()`. By its code, so that the algorithms in `parallel/` carry no marker."""
    _ANSWERS[fn.__code__] = name
    return fn


def own_answer(name: str):
    """`mark` as a decorator."""
    return lambda fn: mark(fn, name)


def own_answer_name(fn) -> str | None:
    """The exercise `fn` is the course's own answer to, if it is one (else None)."""
    while fn is not None:
        name = _ANSWERS.get(getattr(fn, "__code__", None))
        if name:
            return name
        fn = getattr(fn, "func", None)  # a functools.partial of one
    return None


def _refuse(frame, event, arg):
    if event == "call" and frame.f_code in _ANSWERS:
        raise OwnAnswerUsed(message(_ANSWERS[frame.f_code]))


@contextlib.contextmanager
def refusing():
    """While the learner's function runs: a call of any marked function raises (watched by a
    profile hook on this thread, which Python turns off once it has raised)."""
    previous = sys.getprofile()
    sys.setprofile(_refuse)
    try:
        yield
    finally:
        sys.setprofile(previous)


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


class Unanswered(Exception):
    """Raised by `answer` in place of a result; its text is the checker's ✗ line."""


class LearnerRaised(Exception):
    """Raised by `answer` when the learner's function raised: the error is the learner's
    to fix, where an error in the checker's own code afterwards is not (`__cause__`)."""


def answer(fn, *args):
    """The learner's `fn(*args)`, run inside `refusing()`. Raises `Unanswered` with
    NOT_SOLVED while `fn` is the stub, or with the refusal when it used the course's own;
    `LearnerRaised` from whatever `fn` raised."""
    try:
        got = attempt_refusing(fn, *args)
    except Exception as error:
        raise LearnerRaised() from error
    if isinstance(got, Refused) or got is NOT_SOLVED:
        raise Unanswered(str(got))
    return got


def first_problem_verdict(fn, name: str, problem, cases, solved: str) -> Verdict:
    """Print the verdict on the learner's `fn` (the exercise `name`): refused if it is the
    course's own answer; else `problem(*case)` for each case, the first that finds one
    (its text, `answer`'s, or what `fn` raised) gives the ✗; `solved` if none does.

    An error raised while the checker reads what `fn` returned is named as such: most
    likely a result of another type or shape than asked, but not something `fn` raised."""
    if owned := own_answer_name(fn):
        return verdict(False, message(owned))
    for case in cases:
        try:
            found = problem(*case)
        except Unanswered as unanswered:
            return verdict(False, str(unanswered))
        except LearnerRaised as raised:
            error = raised.__cause__
            return verdict(False, f"{name} raised {type(error).__name__}: {error}")
        except Exception as error:
            found = (
                f"the checker could not read what {name} returned ({type(error).__name__}: "
                f"{error}): return what the exercise asks for"
            )
        if found:
            return verdict(False, found)
    return verdict(True, solved)


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
