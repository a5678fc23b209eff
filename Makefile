# One task runner: `make` (= `make check`) runs lint and the tests; CI calls the same recipe.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.DEFAULT_GOAL := check
.PHONY: install demo demo-host test lint check bench bench-smoke

# The virtualenv is rebuilt whenever pyproject.toml or the lock changes. Every third-party
# package comes from requirements-dev.lock, checked against its hashes; flowerbox itself is
# installed from this checkout with no dependency resolution and no build environment of
# its own (hatchling is in the lock), so nothing unpinned is fetched.
$(VENV)/.installed: pyproject.toml requirements-dev.lock
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --require-hashes -r requirements-dev.lock
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

install: $(VENV)/.installed

# checkov (tests/kube/test_checkov.py) pins many packages of its own: a virtualenv of its own,
# outside the dev extra, so its pins never decide flowerbox's.
CHECKOV_VENV ?= .venv-checkov
$(CHECKOV_VENV)/.installed:
	$(PY) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install -q 'checkov==3.3.30'
	touch $@

# The appliance on the built-in scripted model: docker/prepare.sh uses the engine that
# answers, makes the base image and builds the image; where a step needs root it stops first
# and says what to run (sudo, once). It removes only its own builds' leftovers.
demo: install
	bash docker/prepare.sh
	$(BIN)/flowerbox demo

# The same cycle without Docker: flower on this machine.
demo-host: install
	$(BIN)/flower demo

# The suite and the smoke write bytecode even where the shell says not to
# (PYTHONDONTWRITEBYTECODE=1): they start hundreds of flower and flowerbox processes, each of
# which would compile the checkout's modules again (~60 ms of CPU a run's start), and each xdist
# worker would rewrite every test module's asserts again (collection 9 -> 3 s of CPU). The
# __pycache__ folders are ignored by git and by the image's build context (.dockerignore).
test bench-smoke: export PYTHONDONTWRITEBYTECODE :=

# pytest's -ra (pyproject) ends the run with every skip and its reason. One worker per core
# (pytest-xdist); the few tests that share what one worker must hold alone run in one worker
# (their xdist_group, tests/conftest.py); the 20 slowest are listed so the next slow one is seen.
test: install $(CHECKOV_VENV)/.installed
	$(BIN)/python -m pytest -n auto --dist loadgroup --durations=20

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m tests.import_rules

check: lint test

bench: install
	$(BIN)/python -m bench

# Every benchmark at a tiny size, in each language its fake model routes in: each must still
# run and print its figures (targets are judged by `make bench`, on a quiet machine). CI runs it.
bench-smoke: install
	$(BIN)/python -m bench --smoke
