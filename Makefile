# Two commands are all the set-up: `make quickstart` and `make test` create or refresh .venv first.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp
PRESET ?= tiny

.PHONY: setup quickstart test test-slow figures bench clean-venv

setup: $(STAMP)

# Rebuilt whenever pyproject.toml changes (the stamp is older than the pins).
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	@touch $(STAMP)

quickstart: $(STAMP)
	$(BIN)/workbench quickstart --preset $(PRESET)

# Unit, CLI and doctests in parallel; then every notebook at smoke size under nbval (serially:
# the notebooks share one smoke store).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile tests --doctest-modules workbench
	$(BIN)/python -m pytest -q -p no:xdist --nbval-lax notebooks

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow tests

figures: $(STAMP)
	$(BIN)/workbench figures

clean-venv:
	rm -rf $(VENV)
