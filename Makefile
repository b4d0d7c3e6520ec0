# The two commands of the course (see README.md):
#   make lab    set up .venv if needed and open JupyterLab on notebooks/
#   make test   set up .venv if needed, lint, run the unit tests and every notebook under nbval
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.course-installed
PYTEST_WORKERS ?= 2
CELL_TIMEOUT ?= 300
# JupyterLab refuses to start as root (containers, lab VMs) unless told it is on purpose.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: lab test lint unit notebooks format refresh doctor clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ROOT_FLAG) $(LAB_ARGS)

test: lint unit notebooks

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

unit: $(STAMP)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile tests

# One notebook at a time: they measure timings, and each uses both cores.
notebooks: $(STAMP)
	COURSE_PROFILE=cpu $(BIN)/python -m pytest --nbval-lax --nbval-current-env \
		--nbval-cell-timeout=$(CELL_TIMEOUT) --nbval-sanitize-with tests/nbval_sanitize.cfg \
		-p no:randomly notebooks

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
