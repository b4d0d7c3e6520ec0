"""Exercise checkers, one module per notebook.

A checker runs the learner's code, prints one verdict line (`✓ ...`, or `✗ not solved
yet` / `✗ <what is wrong and how to fix it>`) and returns whether it passed; it never
raises at the learner. Reference solutions live in notebooks/solutions/, and
tests/test_exercises_*.py run each checker against them and against the classic mistakes.
"""

from ..checks import NOT_SOLVED


def attempt(fn, *args):
    """The learner's result, or NOT_SOLVED while the function is still the stub.

    A stub raises NotImplementedError or returns None; either means "not solved yet",
    which a checker prints as an expected ✗ rather than as an error.
    """
    try:
        value = fn(*args)
    except NotImplementedError:
        return NOT_SOLVED
    return NOT_SOLVED if value is None else value
