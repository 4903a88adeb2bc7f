# The two commands of the README: `make demo` (the main job) and `make test`.
# Each creates .venv and installs what it needs on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench lint test-langgraph-upstream

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

demo: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	$(BIN)/python examples/cross_machine_resume.py $(REMOTE)

test: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,bench]"
	$(BIN)/ruff check agentfs tests tests_upstream benchmarks examples
	$(BIN)/mypy
	$(BIN)/python -m pytest -q
	$(MAKE) test-langgraph-upstream
	$(BIN)/python -m benchmarks --quick --results .bench-quick

bench: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,bench]"
	$(BIN)/python -m benchmarks

# LangGraph's own checkpointer tests (from the installed langgraph's sdist, cached in .cache/) with
# AgentFSSaver beside the stock savers; fails if agentfs fails a test both stock savers pass
test-langgraph-upstream: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	$(BIN)/python -m tests_upstream
