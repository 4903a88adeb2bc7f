# The two commands of the README: `make demo` (the main job) and `make test`.
# Each creates .venv and installs what it needs on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench lint

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

demo: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	$(BIN)/python examples/cross_machine_resume.py $(REMOTE)

test: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,bench]"
	$(BIN)/ruff check agentfs tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/python -m pytest -q
	$(BIN)/python -m benchmarks --quick --results .bench-quick

bench: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,bench]"
	$(BIN)/python -m benchmarks

# Every crash state of every workload (tests/crashsim/README.md); `make test` runs a bounded sample.
.PHONY: crash-states
crash-states: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	AGENTFS_CRASH_STATES=full $(BIN)/python -m pytest -q tests/test_crash_states.py
