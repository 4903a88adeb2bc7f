# The two commands of the README: `make demo` (the main job) and `make test`.
# Each creates .venv and installs what it needs on a fresh machine.
# While working: `make check` (lint, the docs, the fast tests; under 3 minutes) and `make lint`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test check lint docs readme-check bench dist-check test-langgraph-upstream crash-states faketime strace test-strands test-push-stress chromium

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

demo: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	$(BIN)/python examples/cross_machine_resume.py $(REMOTE)

# the extras lint, docs and check need, installed again only when pyproject.toml changes (the test
# extra includes the docs extra)
TEST_DEPS := $(VENV)/.test-deps
DOCS_DEPS := $(VENV)/.docs-deps
$(TEST_DEPS): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@ $(DOCS_DEPS)
$(DOCS_DEPS): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	touch $@

test: $(BIN)/python faketime chromium strace
	$(BIN)/python -m pip install --quiet -e ".[test,bench]"
	touch $(TEST_DEPS) $(DOCS_DEPS)
	$(MAKE) --no-print-directory lint docs
	$(BIN)/python -m pytest -q -n auto --dist loadgroup
	$(MAKE) test-langgraph-upstream
	$(MAKE) --no-print-directory test-strands
	$(BIN)/python -m benchmarks --quick --results .bench-quick
	$(MAKE) --no-print-directory dist-check readme-check

# ruff (lint and format), mypy and import-linter's contracts (pyproject.toml [tool.importlinter])
lint: $(TEST_DEPS)
	$(BIN)/ruff check agentfs tests tests_upstream tests_strands benchmarks examples
	$(BIN)/ruff format --check agentfs tests tests_upstream tests_strands benchmarks examples
	$(BIN)/mypy
	$(BIN)/lint-imports

# The docs site (mkdocs.yml) into site/: strict, so a broken link or anchor, a page missing from the
# navigation or a missing included file fails
docs: $(DOCS_DEPS)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The fast tests: the format, the engine, serialization and the Python API on local stores (no remote
# servers, no frameworks, no CLI processes, no crash harness), and the check that every test path the code
# and the docs name exists; the whole suite is `make test`
CHECK_TESTS := tests/docs/test_named_tests_exist.py \
	tests/format/test_bytes_on_disk.py tests/format/test_versions_and_extension.py tests/format/test_vectors_from_spec.py \
	tests/format/test_vectors_read_by_agentfs.py tests/format/test_checkpoint_ids.py tests/format/test_blob_references.py \
	tests/engine/test_index.py tests/engine/test_index_footer.py tests/engine/test_engine_api.py \
	tests/engine/test_lineage_parents.py tests/engine/test_gc.py tests/engine/test_locks.py \
	tests/serialization/test_roundtrip.py tests/serialization/test_serialization_errors.py \
	tests/serialization/test_serialization_packer.py \
	tests/objects/test_read_path.py tests/objects/test_dedup.py \
	tests/core/test_api.py tests/core/test_checkpoint_summary.py tests/core/test_unsafe_names.py tests/core/test_run_id_slice.py \
	tests/core/test_schema_versions.py tests/core/test_retention.py \
	tests/encryption/test_encryption.py
check: lint docs
	$(BIN)/python -m pytest -q $(CHECK_TESTS)

# The README's install section and quick start, verbatim, in a fresh clone of the committed HEAD
readme-check: $(BIN)/python
	$(BIN)/python -m tests.readme_install

bench: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,bench]"
	$(BIN)/python -m benchmarks

# The release check: build the sdist and the wheel (from the sdist) as `python -m build` does,
# refuse a build that prints a deprecation, `twine check --strict` both, then install the wheel
# into a throwaway venv and import it from outside the source tree.
dist-check: $(BIN)/python
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(BIN)/python -m build --outdir "$$tmp/dist" . >"$$tmp/build.log" 2>&1 || { cat "$$tmp/build.log"; exit 1; }; \
	if grep -i -A2 deprecat "$$tmp/build.log"; then echo "dist-check: the build printed a deprecation"; exit 1; fi; \
	$(BIN)/python -m twine check --strict "$$tmp"/dist/*; \
	$(BIN)/python -m venv "$$tmp/venv"; \
	"$$tmp/venv/bin/python" -m pip install --quiet "$$tmp"/dist/*.whl; \
	cd "$$tmp"; \
	venv/bin/python -c 'import importlib.metadata as m, agentfs; v = m.version("agentfs-store"); assert v == agentfs.__version__, v; print("dist-check: agentfs-store", v, "imports from", agentfs.__file__)'; \
	venv/bin/agentfs --version

# LangGraph's own checkpointer tests (from the installed langgraph's sdist, cached in .cache/) with
# AgentFSSaver beside the stock savers; fails if agentfs fails a test both stock savers pass
test-langgraph-upstream: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	$(BIN)/python -m tests_upstream

# Strands (strands-agents pins mcp<2.2; the test extra needs mcp>=2.3): its tests, tests_strands/, run in their own
# venv with the strands extra and what they import; the main suite does not collect them (testpaths)
STRANDS_VENV := .venv-strands
$(STRANDS_VENV)/bin/python:
	$(PYTHON) -m venv $(STRANDS_VENV)
	$(STRANDS_VENV)/bin/python -m pip install --quiet --upgrade pip

test-strands: $(STRANDS_VENV)/bin/python
	$(STRANDS_VENV)/bin/python -m pip install --quiet -e ".[strands,test-strands]"
	$(STRANDS_VENV)/bin/python -m pytest -q tests_strands

# Every crash state of every workload (tests/crashsim/README.md); `make test` runs a bounded sample.
crash-states: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	AGENTFS_CRASH_STATES=full $(BIN)/python -m pytest -q tests/engine/test_crash_states.py

# The interrupted-push test at the issue's size (300 MB, 10 SIGKILLs) and the memory test at 1 GiB on
# moto too; `make test` runs 64 MB with 2 kills, and 1 GiB on a file remote with 64 MiB on moto
test-push-stress: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	AGENTFS_RESUME_BYTES=300000000 AGENTFS_RESUME_KILLS=10 AGENTFS_MEMORY_S3_BYTES=1073741824 \
		$(BIN)/python -m pytest -q -s tests/sync/test_push_resume.py tests/sync/test_sync_memory.py

# libfaketime for the clock-skew tests (Debian package faketime); installed once, skipped when present
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
faketime:
	@ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || \
		($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq faketime)

# strace for the crash-state and syscall-count tests, which fail under CI without it (tests/helpers/tools.py)
strace:
	@test -x /usr/bin/strace || ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq strace)

# Debian's chromium for the browser tests of `agentfs ui` (Playwright drives it by path; no browser download)
chromium:
	@test -x /usr/bin/chromium || ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium)
