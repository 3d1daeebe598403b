# The two commands of the README: `make serve` (the service on the embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/codreamer: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[test]"
	touch $@

.PHONY: install serve run test test-fast bench
install: $(BIN)/codreamer

serve: install
	$(BIN)/codreamer serve

run: install
	$(BIN)/codreamer run --iterations 10

test: install  # in two workers, then the tests that must run alone
	$(BIN)/python -m pytest -n 2 --dist loadfile -m "not serial"
	$(BIN)/python -m pytest -m serial

test-fast: install
	$(BIN)/python -m pytest -n 2 --dist loadfile -m "not slow and not serial"

bench: install
	$(BIN)/pip install --quiet -e ".[test,bench]"
	$(BIN)/python -m bench
