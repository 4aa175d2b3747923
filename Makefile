# The README's two commands: `make run` (everything up, the demo batch) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
# llama.cpp (for the real-model tests) compiles from source; a native build crashed on our machines.
LLAMA_FLAGS := CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON"

.PHONY: run test lint bench install clean docs

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e .
	touch $(RUN_STAMP)

$(TEST_STAMP): pyproject.toml | $(VENV)/bin/python
	$(LLAMA_FLAGS) $(PY) -m pip install --quiet -e '.[dev,realmodel]'
	touch $(TEST_STAMP) $(RUN_STAMP)

install: $(TEST_STAMP)

run: $(RUN_STAMP)
	$(VENV)/bin/signoff up --demo

test: $(TEST_STAMP)
	$(PY) -m pytest -q

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: $(TEST_STAMP)
	$(PY) -m bench

docs: $(TEST_STAMP)
	$(PY) docs/update_readme.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
