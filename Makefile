# The two commands: `make demo` (the flights pipeline) and `make test` (the whole suite).
# Both create .venv with the interpreter below and install seglog with its extras.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test check bench clean

$(BIN)/.installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found: install Python 3.11 or run 'make PYTHON=python3 ...'"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[spark,demo,dev]'
	@touch $@

demo: $(BIN)/.installed
	$(BIN)/python -m examples.flights

test: $(BIN)/.installed
	$(BIN)/python -m pytest

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
	rm -rf $(VENV) data out .pytest_cache .mypy_cache .ruff_cache
