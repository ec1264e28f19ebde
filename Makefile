# The two commands: `make demo` (the flights pipeline) and `make test` (the whole suite, what
# CI runs). Both create .venv with the interpreter below and install seglog with its extras.
# `make test-fast`: the edit loop's tier (unit and in-process tests, in parallel, < 2 min).
# Extra pytest arguments: `make test PYTEST_ARGS="-x tests/storage"`.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-fast check bench clean

$(BIN)/.installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found: install Python 3.11 or run 'make PYTHON=python3 ...'"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[spark,demo,dev]'
	@touch $@

demo: $(BIN)/.installed
	$(BIN)/python -m examples.flights

PYTEST_ARGS ?=
# the tiers are markers (tests/conftest.py applies them): test-fast leaves out every test
# that needs a JVM, a crash harness, a `seglog serve` subprocess, or more than ~2 s
FAST_MARKERS := not spark and not crash and not broker and not slow

# serial: the Spark tests share one SparkSession per process, and the broker and crash
# tests measure latencies and kill processes (parallel runs: -n 2 --dist loadgroup keeps
# the spark tests in one worker, see tests/conftest.py)
test: $(BIN)/.installed
	$(BIN)/python -m pytest --durations=25 $(PYTEST_ARGS)

test-fast: $(BIN)/.installed
	$(BIN)/python -m pytest -m "$(FAST_MARKERS)" -n auto --durations=10 $(PYTEST_ARGS)

check: $(BIN)/.installed
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check src tests examples benchmarks
	$(BIN)/mypy

bench: $(BIN)/.installed
	$(BIN)/seglog bench

.PHONY: docs
docs: $(BIN)/.installed
	$(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) data out site .pytest_cache .mypy_cache .ruff_cache
