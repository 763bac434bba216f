# Two-command quick start: `make run` (default study) and `make test` (everything CI checks).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORE := $(VENV)/.core-installed
DEV := $(VENV)/.dev-installed

.PHONY: run test lint bench app calibrate validate clean fuzz

$(BIN)/python:
	$(PY) -m venv $(VENV)

# --no-compile: pip byte-compiles every module it installs (torch alone: 20 of its 29 s here);
# Python compiles the few a run imports on first import instead, once
PIP := $(BIN)/python -m pip install -q --no-compile

$(CORE): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(PIP) -e .
	touch $@

# torch first and pinned: the CPU build, so nothing pulls a multi-GB CUDA build
$(DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(PIP) torch==2.13.0
	$(PIP) -e '.[app,calib,dev,dist,validate]'
	touch $@ $(CORE)

run: $(CORE)
	$(BIN)/mlasim run scenarios/default.yaml

lint: $(DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy sim

test: lint
	$(BIN)/python -m pytest -n auto --dist loadscope --no-loadscope-reorder
	$(BIN)/mlasim check scenarios/

# every Hopper DeepSeek row of aiconfigurator-core's measured sample (docs/validation.md);
# resumable: run it again on the same folder to finish a killed run
validate: $(DEV)
	$(BIN)/mlasim validate --dataset aic --model deepseek --gpu h100,h200 --jobs 2 --out validation-out --docs docs/validation.md

# the acceptance run of issue #25 (hours on 2 cores); FUZZ_ARGS="--scenarios 1000 ..." for less
FUZZ_ARGS ?= --scenarios 10000 --profiles 2000 --configs 2000 --expressions 2000 --traces 500
fuzz: $(DEV)
	$(BIN)/python tests/fuzz/run_fuzz.py $(FUZZ_ARGS)

bench: $(DEV)
	$(BIN)/python bench/bench_engine.py
	$(BIN)/python bench/bench_cost.py
	$(BIN)/python bench/bench_profiles.py
	$(BIN)/python bench/bench_cli.py
	$(BIN)/python bench/bench_app.py

app: $(DEV)
	$(BIN)/mlasim app

calibrate: $(DEV)
	$(BIN)/python -m kernels_calib --out profiles/local.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
