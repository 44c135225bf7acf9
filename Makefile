# `make run` and `make test` set everything up themselves on a fresh clone.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PY_KEY_VALUE_DISABLE_BEARTYPE := true

.PHONY: setup run lint test test-slow test-explore chromium e2e-browser mutants bench bench-e2e bench-evaluate bench-ambiguity bench-muco bench-serial bench-butterfly bench-audit bench-compose bench-scale bench-suppress bench-explore clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/privpub demo

# Also run before each commit by pre-commit (.pre-commit-config.yaml): one command per line.
# lint-imports and mypy read privpub from a tree of links (tests/import_root.py, tests/typecheck.py):
# they cannot follow pyproject.toml's package-dir mapping.
lint: $(STAMP)
	$(BIN)/ruff check flows tasks schemas state deployments tests docs
	$(BIN)/ruff format --check flows tasks schemas state deployments tests docs
	$(BIN)/python -m tests.import_root $(VENV)/lint-root
	PYTHONPATH=$(VENV)/lint-root $(BIN)/lint-imports --no-cache
	$(BIN)/python tests/typecheck.py

# Each test file runs whole in one of PYTEST_WORKERS processes (pytest-xdist, --dist loadfile: a
# file's tests keep their order and share their module fixtures), the longest files first
# (tests/suite_order.py; --no-loadscope-reorder keeps that order). The full-size sweeps (marker
# `slow`) run in `make test-slow`. The 30 slowest tests are listed at the end (docs/testing.md).
PYTEST_WORKERS ?= auto
PYTEST_XDIST := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30
test: $(STAMP) chromium
	$(MAKE) lint
	$(BIN)/python -m pytest $(PYTEST_XDIST) -m "not slow"

test-slow: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_XDIST) -m slow

# The property tests with fresh random draws, more of them (tests/conftest.py): `make test` draws
# the same examples every run; this searches for new failing cases (not run by CI).
test-explore: $(STAMP)
	PRIVPUB_HYPOTHESIS=explore $(BIN)/python -m pytest $(PYTEST_XDIST) -m "not slow" $$(grep -l "from hypothesis" tests/test_*.py)

# The browser tests (tests/test_browser.py) drive Debian's Chromium through playwright (no browser
# download). `make test` installs it when missing, so the browser tests run in every CI run; they
# fail, never skip, without it. Screenshots: artifacts/browser/.
CHROMIUM := /usr/bin/chromium
chromium:
	@test -x $(CHROMIUM) || { echo "installing Debian's chromium for the browser tests"; \
	  SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    --no-install-recommends chromium >/dev/null; }
	@test -x $(CHROMIUM) || { echo "$(CHROMIUM) is still missing: the browser tests cannot run"; exit 1; }

e2e-browser: $(STAMP) chromium
	$(BIN)/python -m pytest tests/test_browser.py

# On demand, not in CI: loosen each privacy check in a copy of the tree and show the tests fail
# (docs/testing.md).
mutants: $(STAMP)
	$(BIN)/python tests/mutation/run_mutants.py

# The benchmark's reference libraries (pycanon, anonypyx) pin numpy / pandas / scipy versions of
# their own: they live in a separate environment, never in $(VENV) or the runtime dependencies.
BENCH_ENV := bench-env
BENCH_REQ := tests/benchmarks/requirements-bench.txt
BENCH_STAMP := $(BENCH_ENV)/.installed
BENCH_ARGS ?=

$(BENCH_STAMP): $(BENCH_REQ)
	$(PY) -m venv $(BENCH_ENV)
	$(BENCH_ENV)/bin/pip install --quiet --upgrade pip
	$(BENCH_ENV)/bin/pip install --quiet -r $(BENCH_REQ)
	touch $(BENCH_STAMP)

bench: $(STAMP) $(BENCH_STAMP)
	$(BIN)/python -m tests.benchmarks.bench_spine --bench-python $(BENCH_ENV)/bin/python $(BENCH_ARGS)

# What a user waits for: `privpub` as a fresh process, installed as a user installs it (`pip
# install .`, no dev tools, in bench-user/), with and without a Prefect server, beside a bare
# anonypyx script (docs/benchmarks.md, "End to end"). Take the lock: flock /tmp/privpub-bench.lock.
USER_ENV := bench-user
USER_STAMP := $(USER_ENV)/.installed
$(USER_STAMP): pyproject.toml $(shell git ls-files flows tasks schemas state deployments 2>/dev/null)
	$(PY) -m venv $(USER_ENV)
	$(USER_ENV)/bin/pip install --quiet --upgrade pip
	$(USER_ENV)/bin/pip install --quiet --force-reinstall --no-deps .
	$(USER_ENV)/bin/pip install --quiet .
	touch $(USER_STAMP)

bench-e2e: $(STAMP) $(BENCH_STAMP) $(USER_STAMP)
	$(BIN)/python -m tests.benchmarks.bench_e2e --bench-python $(BENCH_ENV)/bin/python \
	  --privpub $(USER_ENV)/bin/privpub --prefect $(USER_ENV)/bin/prefect $(BENCH_ARGS)

# One benchmark per technique (each prints its table; see docs/benchmarks.md and the technique docs).
# bench-suppress: generalization with and without [technique] suppress (issue 28); take the lock:
# flock /tmp/privpub-bench.lock make bench-suppress
bench-ambiguity bench-muco bench-serial bench-butterfly bench-audit bench-evaluate bench-compose bench-suppress: bench-%: $(STAMP)
	$(BIN)/python -m tests.benchmarks.bench_$* $(BENCH_ARGS)

# `privpub explore` over k = 5,10,20,40 against one `privpub publish` of k = 10, 1M census rows,
# fresh processes, paired (tests/benchmarks/bench_explore.py; target <= 2x). Take the lock:
# flock /tmp/privpub-bench.lock make bench-explore
bench-explore: $(STAMP)
	$(BIN)/python -m tests.benchmarks.bench_explore $(BENCH_ARGS)

# Issue 15: 20M rows on a LocalCluster of 2 workers of 4 GiB each, beside 1M both ways
# (tests/benchmarks/bench_scale.py; long: run it under flock /tmp/privpub-bench.lock).
bench-scale: $(STAMP)
	$(BIN)/python -m tests.benchmarks.bench_scale $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(BENCH_ENV) demo
