# Two entry points, each sets itself up on a fresh machine:
#   make demo   the main job: a Turn-BoN agent solving a small task, turn by turn
#   make test   lint, type-check and the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: demo test setup setup-test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

setup: $(BIN)/python
	$(BIN)/pip install --quiet -e .

setup-test: $(BIN)/python
	$(BIN)/pip install --quiet -e ".[test]"

demo: setup
	$(BIN)/turnbon demo

lint: setup-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy turnbon_graph

test: lint
	$(BIN)/pytest

bench: setup
	$(BIN)/python benchmarks/turn_latency.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
