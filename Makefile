# Two commands on a fresh machine with Python 3.11 and make:
#   make run    the main job: every lab experiment on embedded SQLite
#   make test   lint, type check and the whole test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint typecheck unit bench dist clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=25.1"

$(VENV)/.run-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[cli,engines,temporal]'
	touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[cli,postgres,redis,engines,temporal,ui,otel,agentdojo]' --group dev
	touch $@ $(VENV)/.run-installed

$(VENV)/.bench-installed: $(VENV)/.dev-installed
	$(BIN)/pip install --quiet --group bench
	touch $@

run: $(VENV)/.run-installed
	$(BIN)/surefoot lab run all --md lab-report.md --json lab-report.json

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts

typecheck: $(VENV)/.dev-installed
	$(BIN)/mypy

unit: $(VENV)/.dev-installed
	$(BIN)/python -m pytest -q -p no:cacheprovider

test: lint typecheck unit

bench: $(VENV)/.bench-installed
	$(BIN)/python benchmarks/bench_retry.py
	$(BIN)/python benchmarks/bench_durable.py
	$(BIN)/python benchmarks/bench_statebus.py
	$(BIN)/python benchmarks/bench_postgres.py

dist: | $(BIN)/python
	$(BIN)/python -m pip wheel --no-deps --quiet -w dist .
	@ls dist/*.whl

clean:
	rm -rf $(VENV) dist .mypy_cache .ruff_cache .pytest_cache lab-report.md lab-report.json
