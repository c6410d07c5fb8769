# Two commands are all the set-up: `make quickstart` and `make test` create or refresh .venv first.
# The interpreter: the one PY= names, else the newest of python3.13, python3.12, python3.11, python3
# that runs and is Python 3.11-3.13 (scripts/find_python.sh; when none fits it says how to get one).
PY ?=
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp
PRESET ?= tiny
# What test-pythons runs in each interpreter's venv (test-unit: no notebooks; `test`: all of it).
PYTHONS_GOAL ?= test-unit

.PHONY: setup quickstart lab docs test test-unit test-slow test-pythons figures bench clean-venv FORCE

# Every goal but these needs the interpreter; none is looked for when only these are asked for.
ifneq ($(filter-out clean-venv test-pythons,$(or $(MAKECMDGOALS),setup)),)
FOUND := $(shell scripts/find_python.sh $(PY) 2>&1)
ifneq ($(.SHELLSTATUS),0)
$(error $(FOUND))
endif
PY_VERSION := $(word 1,$(FOUND))
PYTHON := $(word 2,$(FOUND))
VENV_VERSION := $(shell $(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
endif
# The venv is kept only when its Python is the chosen X.Y: one made by another (or a broken one) is
# made anew, since its compiled packages would not load.
VENV_OK := $(and $(VENV_VERSION),$(filter $(PY_VERSION),$(VENV_VERSION)))

setup: $(STAMP)

# Rebuilt whenever pyproject.toml changes (the stamp is older than the pins) or the venv is not OK.
$(STAMP): pyproject.toml $(if $(VENV_OK),,FORCE)
ifeq ($(VENV_OK),)
ifneq ($(wildcard $(BIN)/python),)
	@echo "$(VENV) has Python $(or $(VENV_VERSION),that does not run) but $(PYTHON) is $(PY_VERSION): making $(VENV) anew"
endif
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
endif
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
ifeq ($(VENV),.venv)
	@scripts/git_nbstripout.sh
endif
	@touch $(STAMP)

quickstart: $(STAMP)
	$(BIN)/workbench quickstart --preset $(PRESET)$(if $(filter 1,$(LONG)), --long)

# JupyterLab from the project's venv (its python3 kernel is the venv's Python), on loopback only,
# opened on LAB_DIR (notebooks/); the URL it prints carries the login token. LAB_FLAGS go to
# `jupyter lab` after ours, e.g. make lab LAB_FLAGS="--port 8899 --no-browser". As root (Docker,
# Colab) Jupyter refuses to start without --allow-root, so it is added for root only.
LAB_DIR ?= notebooks
LAB_FLAGS ?=
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=$(LAB_DIR) $(LAB_ROOT) $(LAB_FLAGS)

# The documentation site in build/site/: every notebook executed at smoke size into build/docs/
# (again only when it or the code changed), then MkDocs Material in strict mode, where a broken
# link or anchor fails the build, and check_site.py follows every internal link of the HTML it
# wrote (the notebooks' pages too). tests/test_docs.py runs the same build (notebooks unexecuted).
# NO_MKDOCS_2_WARNING: Material's end-of-life banner (May 2027), read and noted in docs/start.md.
docs: $(STAMP)
	$(BIN)/python docs/tools/execute_notebooks.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
	$(BIN)/python docs/tools/check_site.py build/site
	@echo "open build/site/index.html (or: $(BIN)/mkdocs serve)"

# Unit, CLI and doctests in parallel; then every notebook at smoke size under nbval (serially:
# the notebooks share one smoke store).
test: test-unit
	$(BIN)/python -m pytest -q -p no:xdist --nbval-lax notebooks

test-unit: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile tests --doctest-modules workbench

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow tests

# Not in CI: set-up and the unit tests under every supported Python found here (scripts/find_python.sh
# --all), each in its own .venv-X.Y; a summary line per version with the seconds each step took.
test-pythons:
	@found="$$(scripts/find_python.sh --all)" || exit 1; set -- $$found; failed=; summary=; \
	while [ $$# -ge 2 ]; do v=$$1; py=$$2; shift 2; echo "== Python $$v ($$py) in .venv-$$v"; \
	  t0=$$(date +%s); if $(MAKE) --no-print-directory setup PY=$$py VENV=.venv-$$v; then \
	    t1=$$(date +%s); if $(MAKE) --no-print-directory $(PYTHONS_GOAL) PY=$$py VENV=.venv-$$v; \
	    then r="$(PYTHONS_GOAL) passed"; else r="$(PYTHONS_GOAL) FAILED"; failed=1; fi; \
	    r="set-up $$((t1 - t0)) s, $$r in $$(($$(date +%s) - t1)) s"; \
	  else r="set-up FAILED after $$(($$(date +%s) - t0)) s"; failed=1; fi; \
	  summary="$$summary  Python $$v ($$py): $$r\n"; done; \
	printf "test-pythons:\n$$summary"; [ -z "$$failed" ]

figures: $(STAMP)
	$(BIN)/workbench figures

clean-venv:
	rm -rf $(VENV)
