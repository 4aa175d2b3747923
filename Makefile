# The README's two commands: `make run` (everything up, the demo batch) and `make test`.
# Both install what they need: system packages (.ci/system-packages: apt-get as root, else the
# command to run) and a virtualenv pinned by constraints.txt.
VENV ?= .venv
PY := $(VENV)/bin/python
LOCK := constraints.txt
PIP_INSTALL := $(PY) -m pip install --quiet -c $(LOCK)
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
# llama.cpp (for the real-model tests) compiles from source; a native build crashed on our machines.
LLAMA_FLAGS := CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON"

.PHONY: run test test-rabbitmq test-cluster test-long lint bench faults fuzz fuzz-quick install clean docs lock system-run system-test

system-run:
	@bash .ci/system-packages run

system-test:
	@bash .ci/system-packages test

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip

$(RUN_STAMP): pyproject.toml $(LOCK) | $(VENV)/bin/python system-run
	$(PIP_INSTALL) -e .
	touch $(RUN_STAMP)

$(TEST_STAMP): pyproject.toml $(LOCK) | $(VENV)/bin/python system-test
	$(LLAMA_FLAGS) $(PIP_INSTALL) -e '.[dev,realmodel]'
	touch $(TEST_STAMP) $(RUN_STAMP)

install: system-test $(TEST_STAMP)

run: system-run $(RUN_STAMP)
	$(VENV)/bin/signoff up --demo

# Two modules at a time, each whole in one process (its worker, Redis and fixtures its own):
# the suite is mostly waiting on real processes, and two cores keep both busy. The tests with
# RabbitMQ as the broker (marker `rabbitmq`) have a target of their own, which CI runs too.
test: system-test $(TEST_STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not rabbitmq and not cluster and not long"

# RabbitMQ as Celery's broker, state in Redis: the machine's RabbitMQ (started by
# .ci/system-packages when it does not answer), a vhost per module, made and deleted.
test-rabbitmq: system-test $(TEST_STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile -m rabbitmq

# The integration suite with state on a real three-primary Redis Cluster (each test process
# forms its own from `redis-server --cluster-enabled` on free ports) and Celery's broker on the
# machine's RabbitMQ (a vhost per test process, made and deleted), and the cluster's own tests
# (marker `cluster`), then the web's tests (API, pages and the browser) on such a cluster; tests
# that assume one Redis which is also the broker (marker `one_redis`: restarts, Sentinel,
# proxies, one node's KEYS or pool) are left out.
test-cluster: system-test $(TEST_STAMP)
	SIGNOFF_TEST_CLUSTER=1 $(PY) -m pytest -q -n 2 --dist loadfile \
		-m "not one_redis and not rabbitmq and not long" tests/integration tests/web

# The long runs against the real model (docs/real-model.md): 100 turns at a 4,096-token context.
test-long: system-test $(TEST_STAMP)
	$(PY) -m pytest -q -m long

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: $(TEST_STAMP)
	$(PY) -m bench

# The fault experiments (docs/reliability.md), a few minutes; CI runs their `--quick` size.
faults: $(TEST_STAMP)
	$(PY) -m faults

# Schemathesis over the API's OpenAPI document (docs/fuzzing.md), every check, ~15 minutes;
# CI runs `fuzz-quick`, a few minutes of the same. Schemathesis gets a virtualenv of its own,
# so it never enters constraints.txt.
FUZZ_VENV := .venv-fuzz
$(FUZZ_VENV)/bin/schemathesis:
	python3 -m venv $(FUZZ_VENV)
	$(FUZZ_VENV)/bin/python -m pip install --quiet 'schemathesis==4.32.5'

fuzz: $(TEST_STAMP) $(FUZZ_VENV)/bin/schemathesis
	$(PY) -m fuzz.api --max-examples 50

# Few cases per operation and a fixed seed, so a CI failure can be repeated with the same seed.
fuzz-quick: $(TEST_STAMP) $(FUZZ_VENV)/bin/schemathesis
	$(PY) -m fuzz.api --max-examples 5 -- --seed 26

docs: $(TEST_STAMP)
	$(PY) docs/update_readme.py

# constraints.txt from a fresh virtualenv: exact versions of all that '.[dev,realmodel]'
# installs today. Run it after changing a dependency in pyproject.toml, and commit the result.
lock: system-test
	rm -rf .venv-lock
	python3 -m venv .venv-lock
	.venv-lock/bin/python -m pip install --quiet --upgrade pip
	$(LLAMA_FLAGS) .venv-lock/bin/python -m pip install --quiet -e '.[dev,realmodel]'
	{ sed -n '/^#/p' $(LOCK); .venv-lock/bin/python -m pip freeze --all --exclude-editable \
	    | grep -v -E '^(setuptools|wheel)=='; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf .venv-lock

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
