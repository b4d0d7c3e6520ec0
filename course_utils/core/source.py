"""Show the code a notebook runs: the function's own source, as `inspect` finds it.

The algorithms live in `parallel/`; a notebook shows the one it is about to run (an
exercise's answer only after the exercise), so the learner reads the code that runs, not a
copy of it. In JupyterLab the source is highlighted; the stored output and a terminal get
the same text plain.
"""

from __future__ import annotations

import inspect


def show(*functions) -> None:
    """Display each function's source, headed by where it lives (plain text outside Jupyter)."""
    from IPython import get_ipython
    from IPython.display import display

    for fn in functions:
        code = inspect.getsource(inspect.unwrap(fn)).rstrip()
        text = f"# {fn.__module__}.{fn.__qualname__}\n{code}"
        if get_ipython() is None:
            print(text)
            continue
        display({"text/markdown": f"```python\n{text}\n```", "text/plain": text}, raw=True)
