# The two commands of the course (see README.md):
#   make lab    set up .venv if needed and open JupyterLab on notebooks/
#   make test   set up .venv if needed, lint, run the unit tests and every notebook under nbval
#   make stress the unit tests and notebooks STRESS_RUNS times beside STRESS_HOGS CPU hogs
#   make browser-test  every notebook in JupyterLab in a real browser (not part of make test)
#   make site   the course as a static website in build/site, from the committed notebooks
#   make site-test  three of its pages in Chromium, screenshotted (not part of make test)
#   make test-start-methods  launcher tests and notebooks 00, 04, 10 under fork, forkserver, spawn
#   make cluster-test  the multi-node commands across two network-namespace nodes (root, Linux)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.course-installed
# Three workers on 2 cores: the unit tests wait a quarter of their time (a rank's timeout,
# torchrun agents starting, a killed worker noticed), which a third worker fills: 343 s
# with two, 321-323 s with three (twice each, the same machine and day).
PYTEST_WORKERS ?= 3
CELL_TIMEOUT ?= 300
STRESS_RUNS ?= 3
STRESS_HOGS ?= 1
# JupyterLab refuses to start as root (containers, lab VMs) unless told it is on purpose.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: lab test lint unit notebooks stress format refresh doctor clean test-oldest browser-test \
	site site-test test-start-methods cluster-test

# pip compiles no bytecode (--no-compile): compiling every module of torch, its CUDA
# libraries' wrappers and Jupyter took 24 s of a 72-87 s install, where the modules a run
# imports compile in 4 s the first time. So make lets Python write that bytecode even
# where the environment says not to: otherwise every process would compile torch anew.
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "pip>=23"
	$(BIN)/python -m pip install --quiet --no-compile -e ".[dev]"
	@touch $(STAMP)

# JupyterLab's settings for the course: widget state saved with the notebook, so that a
# notebook the learner saved shows each chart and control's picture after a reopen.
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json
$(LAB_SETTINGS): course_utils/course/lab_settings.json $(STAMP)
	@mkdir -p $(dir $@)
	cp $< $@

# NOTEBOOK_DIR: another folder to serve (`make browser-test` serves a scratch copy).
NOTEBOOK_DIR ?= notebooks
lab: $(STAMP) $(LAB_SETTINGS)
	$(BIN)/jupyter lab --notebook-dir=$(NOTEBOOK_DIR) $(ROOT_FLAG) $(LAB_ARGS)

test: lint unit notebooks

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# -p no:nbval: the plugin imports nbformat in the controller and every worker, and its
# jsonschema imports rfc3987_syntax, which builds a grammar as it loads (1.3 s of the 1.6 s
# `import nbformat` takes here); the unit tests run no notebook through it. The longest
# files first, in the order tests/conftest.py sorts them.
unit: $(STAMP)
	$(BIN)/python -m pytest -p no:nbval -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 tests

# The notebooks with no verdict on the real clock two at a time, in the order that ends
# soonest; then the others one at a time, with both cores to themselves
# (tests/notebook_groups.py says why).
NBVAL := COURSE_PROFILE=cpu $(BIN)/python -m pytest --nbval-lax --nbval-current-env \
	--nbval-cell-timeout=$(CELL_TIMEOUT) --nbval-sanitize-with tests/nbval_sanitize.cfg \
	-p no:randomly
notebooks: $(STAMP)
	shared=$$($(BIN)/python tests/notebook_groups.py shared) && \
		$(NBVAL) -n 2 --dist loadfile --no-loadscope-reorder $$shared
	alone=$$($(BIN)/python tests/notebook_groups.py alone) && $(NBVAL) $$alone

# The unit tests on the oldest torch/torchvision pair pyproject.toml allows (its lower
# bounds, pinned), in a scratch venv; CI keeps testing the newest pair.
OLDEST_VENV ?= build/venv-oldest
OLDEST_PAIR := $(shell sed -n 's/^ *"\(torch\|torchvision\)>=\([0-9.]*\)",.*/\1==\2/p' pyproject.toml)
test-oldest:
	@test -x $(OLDEST_VENV)/bin/python || $(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install --quiet "pip>=23"
	$(OLDEST_VENV)/bin/python -m pip install --quiet $(OLDEST_PAIR) -e ".[dev]"
	$(OLDEST_VENV)/bin/python -c "import torch, torchvision; print('oldest pair:', torch.__version__, torchvision.__version__)"
	$(OLDEST_VENV)/bin/python -m pytest -p no:nbval -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 tests

# Does `make test` hold on a busy machine? Real-clock verdicts may say "not judged"; no other may flip.
stress: $(STAMP)
	.ci/stress $(STRESS_RUNS) $(STRESS_HOGS)

# The course in a real browser, as a learner meets it in JupyterLab (tests/browser/run.py
# says what is checked): Debian's Chromium, installed with apt-get when missing, driven by
# playwright from a scratch venv; playwright downloads no browser of its own. Writes
# build/browser-test/summary.json and screenshots; fails if any count is not 0.
# NOTEBOOKS="00 08" runs a subset.
CHROMIUM ?= /usr/bin/chromium
BROWSER_VENV ?= build/browser-venv
BROWSER_TIMEOUT ?= 300
$(BROWSER_VENV)/.installed:
	@test -x $(BROWSER_VENV)/bin/python || $(PYTHON) -m venv $(BROWSER_VENV)
	$(BROWSER_VENV)/bin/python -m pip install --quiet "pip>=23"
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(BROWSER_VENV)/bin/python -m pip install --quiet \
		"playwright>=1.40,<2" "psutil>=5.9"
	@touch $@

browser-test: $(STAMP) $(LAB_SETTINGS) $(BROWSER_VENV)/.installed
	@tests/browser/ensure-chromium.sh $(CHROMIUM)
	$(BROWSER_VENV)/bin/python tests/browser/run.py --chromium $(CHROMIUM) \
		--timeout $(BROWSER_TIMEOUT) $(NOTEBOOKS)

# The launcher's tests, the real kernel's interrupt tests and notebooks 00, 04 and 10 under
# each start method (COURSE_START_METHOD), with each notebook's time beside fork's.
test-start-methods: $(STAMP)
	$(BIN)/python tests/start_methods.py

# Several machines on one (root, Linux; not part of make test): nodes made of network
# namespaces at their own addresses; the README's torchrun jobs, 04's training script and the
# README's SLURM script run across two of them, and the all-reduce algorithms on 2 to 8 of
# them behind shaped links against the simulator (tests/cluster/cluster_check.py says what
# is checked; it installs Debian's Slurm when missing). First the checks are stopped with
# Ctrl-C a minute in, which must leave no namespace, link, file or process behind.
cluster-test: $(STAMP)
	$(BIN)/python tests/cluster/cluster_check.py --interrupt-after 60
	$(BIN)/python tests/cluster/cluster_check.py

# The course as a website, built from the committed, executed notebooks without running
# them (Sphinx, MyST-NB, the furo theme), in its own venv so that make test's stays as it is.
# The build needs no network; installing the venv the first time needs the package index.
SITE_VENV ?= build/site-venv
$(SITE_VENV)/.installed:
	@test -x $(SITE_VENV)/bin/python || $(PYTHON) -m venv $(SITE_VENV)
	$(SITE_VENV)/bin/python -m pip install --quiet "pip>=23"
	$(SITE_VENV)/bin/python -m pip install --quiet "sphinx>=7" "myst-nb>=1.1" "furo>=2024.1"
	@touch $@

site: $(SITE_VENV)/.installed
	$(SITE_VENV)/bin/python course_utils/course/site.py build/site-src
	rm -rf build/site
	$(SITE_VENV)/bin/sphinx-build -q -b html -j auto build/site-src build/site
	@echo "site: open build/site/index.html"

# Three pages of the site in Chromium (see tests/browser/site_pages.py): screenshots in
# build/site-test for a person to look at; fails on a missing picture or stylesheet.
site-test: site $(BROWSER_VENV)/.installed
	@tests/browser/ensure-chromium.sh $(CHROMIUM)
	$(BROWSER_VENV)/bin/python tests/browser/site_pages.py --site build/site \
		--chromium $(CHROMIUM) --out build/site-test

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Re-execute every notebook with the cpu profile and store the outputs that get committed.
refresh: $(STAMP)
	COURSE_PROFILE=cpu $(BIN)/python -m course_utils run --profile cpu --write

doctor: $(STAMP)
	$(BIN)/python -m course_utils doctor

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
