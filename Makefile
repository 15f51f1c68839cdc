# Two entry points that work on a fresh machine: `make demo` and `make test`.
# Override TORCH_SPEC elsewhere (e.g. TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu").
PYTHON     ?= python3
VENV       ?= .venv
TORCH_SPEC ?= torch==2.13.0
DEMO_ARGS  ?=
PYTEST_ARGS ?=
# pytest workers (pytest-xdist): one per core here; 0 runs every test in this process
PYTEST_JOBS ?= 2

BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck venv clean bench verl-envs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch is installed first, then pinned: the dev extra (TRL, transformers, accelerate) must
# install beside it, never replace it.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q $(TORCH_SPEC)
	$(BIN)/python -c "import torch; print('torch==' + torch.__version__.split('+')[0])" > $(VENV)/torch-constraint.txt
	$(BIN)/pip install -q -c $(VENV)/torch-constraint.txt -e ".[dev]"
	$(BIN)/python -c "import torch, sys; sys.exit(open('$(VENV)/torch-constraint.txt').read().strip() != 'torch==' + torch.__version__.split('+')[0])"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/curriculum simulate $(DEMO_ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -n $(PYTEST_JOBS) $(PYTEST_ARGS)
	$(BIN)/ruff check scheduler domains policies tests bench configs examples
	$(BIN)/ruff format --check scheduler domains policies tests bench configs examples
	$(BIN)/mypy

# One environment per verl version for tests/integrations/test_verl_envs.py (cached outside
# the clone; .ci/run builds them before `make test`).
verl-envs:
	scripts/build_verl_envs.sh

bench: $(STAMP)
	$(BIN)/python bench/quality.py

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
