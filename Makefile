# Two entry points that work on a fresh machine: `make demo` and `make test`.
# Override TORCH_SPEC elsewhere (e.g. TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu").
PYTHON     ?= python3
VENV       ?= .venv
TORCH_SPEC ?= torch==2.13.0
DEMO_ARGS  ?=
PYTEST_ARGS ?=

BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck venv clean bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q $(TORCH_SPEC)
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/curriculum simulate $(DEMO_ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)
	$(BIN)/ruff check scheduler domains policies tests bench configs
	$(BIN)/ruff format --check scheduler domains policies tests bench configs
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/quality.py

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
