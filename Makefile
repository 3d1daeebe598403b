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

.PHONY: install serve run test test-fast test-unit test-service test-e2e bench
install: $(BIN)/codreamer

serve: install
	$(BIN)/codreamer serve --host $(HOST) --port $(PORT)

run: install
	$(BIN)/codreamer run --iterations 10

# Tests by kind (tests/unit, tests/service, tests/e2e); ARGS passes more to pytest (ARGS="-x --durations=20").
# Two workers, a test file per worker at a time (--dist loadfile): a module's server or app starts
# once, not once per worker. Files are handed out in collection order (e2e, service, unit: the longest
# kinds first, the short unit files fill the end) rather than xdist's default, most tests first, which
# left the long end-to-end files with few tests for last.
PYTEST := $(BIN)/python -m pytest
PARALLEL := -n 2 --dist loadfile --no-loadscope-reorder
ARGS ?=

# $(1): the tests. The part in two workers, then the tests marked serial (they restart PostgreSQL) alone;
# the serial part runs even when the first failed, and the target fails when either did.
define parallel_then_serial
	@parallel=0; serial=0; \
	$(PYTEST) $(PARALLEL) -m "not serial" $(ARGS) $(1) || parallel=$$?; \
	$(PYTEST) -m serial $(ARGS) $(1) || serial=$$?; \
	if [ $$serial -eq 5 ]; then serial=0; fi; \
	echo "tests in two workers: $$([ $$parallel -eq 0 ] && echo passed || echo "FAILED (exit $$parallel)");" \
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

test-e2e: install  # real processes, kill -9, chromium, Schemathesis; then the PostgreSQL restart alone
	$(call parallel_then_serial,tests/e2e)

bench: install
	$(BIN)/pip install --quiet -e ".[test,bench]"
	$(BIN)/python -m bench
