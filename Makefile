VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install check test bench demo format

$(BIN)/topoq:
	python3 -m venv $(VENV)
	$(BIN)/pip install -q -e '.[dev]'

install: $(BIN)/topoq

## Lint, format check, strict typing, and the layer contracts.
check: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

test: install
	$(BIN)/pytest

bench: install
	$(BIN)/python -m benchmarks.placement

demo: install
	$(BIN)/topoq demo

format: install
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks
