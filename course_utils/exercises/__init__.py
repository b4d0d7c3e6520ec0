"""Exercise checkers, one module per notebook.

A checker runs the learner's code, prints one verdict line (`✓ ...`, or `✗ not solved
yet` / `✗ <what is wrong and how to fix it>`) and returns whether it passed; it never
raises at the learner. Reference solutions live in notebooks/solutions/, and
tests/test_exercises_*.py run each checker against them and against the classic mistakes.
"""
