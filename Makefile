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

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile tests notebooks --nbval-lax

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow tests

figures: $(STAMP)
	$(BIN)/workbench figures

clean-venv:
	rm -rf $(VENV)
