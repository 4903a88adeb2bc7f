# The two commands of the README: `make demo` (the main job) and `make test`.
# Each creates .venv and installs what it needs on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench lint faketime

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

demo: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	$(BIN)/python examples/cross_machine_resume.py $(REMOTE)

test: $(BIN)/python faketime
	$(BIN)/python -m pip install --quiet -e ".[test,bench]"
	$(BIN)/ruff check agentfs tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q
	$(BIN)/python -m benchmarks --quick --results .bench-quick

bench: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,bench]"
	$(BIN)/python -m benchmarks

# libfaketime for the clock-skew tests (Debian package faketime); installed once, skipped when present
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
faketime:
	@ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || \
		($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq faketime)
