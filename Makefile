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

## Placement on 512 to 8,192 nodes (~30 s), then the REST API under load on SQLite and
## PostgreSQL (~3 min; PostgreSQL from the distribution's packages, as .ci/run installs it),
## cluster reads under a long queue (~4 min) and replacing a dead API process (~3 min).
bench: install
	$(BIN)/python -m benchmarks.placement
	$(BIN)/python -m benchmarks.api
	$(BIN)/python -m benchmarks.cluster_reads
	$(BIN)/python -m benchmarks.worker_replacement
	$(BIN)/python -m benchmarks.cycle
	$(BIN)/python -m benchmarks.quota_arithmetic
	$(BIN)/python -m benchmarks.controller_step
	$(BIN)/python -m benchmarks.simulation

demo: install
	$(BIN)/topoq demo

format: install
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks
