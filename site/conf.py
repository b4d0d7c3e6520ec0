"""Sphinx's settings for the course's website (`make site`; `site/prepare.py` lays it out).

The notebooks are shown as committed, executed with the cpu profile: nothing runs here, so
the site builds offline in a minute and shows what the repository's notebooks show.
"""

project = "Parallel training, hands on"
author = "parallel-training-course"
extensions = ["myst_nb"]
nb_execution_mode = "off"  # the stored outputs are the ones every reader sees
nb_merge_streams = True  # a cell's stdout in one block, as JupyterLab shows it
myst_enable_extensions = ["dollarmath", "colon_fence"]
html_theme = "furo"  # installed from the package index with Sphinx: nothing fetched later
html_title = project
html_extra_path = ["extra"]  # the course map's pictures, which the README shows as raw HTML
exclude_patterns = ["_build", "extra"]
suppress_warnings = ["myst.header", "misc.highlighting_failure"]  # headings below level 2; a
# traceback with a backquote that the lexer retries, relaxed, and shows all the same
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_show_copyright = False
