# streamforest developer entry points. Needs Python 3.11, a Java 17+ runtime and Maven (for the local broker).
#
#   make setup          .venv with the project (editable) and its test extra, broker jars in the cache
#   make test           lint (ruff) and the whole test suite, docstring examples included (integration
#                       tests start a local Kafka broker on free ports)
#   make demo           the demo
#   make broker-start   a local Kafka broker on BROKER_PORT (default 9092) in the background; make broker-stop
#   make bench          the benchmark scripts tests/benchmarks/bench_*.py
#   make image          the worker image with podman (deploy/image/build.sh; root, podman, runc, debootstrap)
#   make deploy-test    the image if needed, then three worker containers in one group, killed, scaled
#                       and stopped, every output checked (tests/deploy/group.py; outside `make test`)
#
# Variables: PYTHON (interpreter for the venv), VENV, PYTEST_ARGS (e.g. PYTEST_ARGS='-m "not kafka"'),
# BROKER_PORT, CONTROLLER_PORT, BENCH (benchmark scripts to run), IMAGE (worker image name),
# DEPLOY_ARGS (e.g. DEPLOY_ARGS='--out tests/benchmarks/results/deploy-run.md').

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
BROKER_PORT ?= 9092
CONTROLLER_PORT ?= 9093
BROKER_ARGS := --port $(BROKER_PORT) --controller-port $(CONTROLLER_PORT)
BENCH ?= $(wildcard tests/benchmarks/bench_*.py)
IMAGE ?= localhost/streamforest
DEPLOY_ARGS ?=

# stamps: reinstall only when pyproject.toml changes, fetch the jars again only when the pom changes
INSTALLED := $(VENV)/.installed
FETCHED := $(VENV)/.kafka-fetched

.PHONY: setup test demo broker-start broker-stop bench image deploy-test

setup: $(INSTALLED) $(FETCHED)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

$(FETCHED): deploy/local-kafka/pom.xml $(INSTALLED)
	$(BIN)/streamforest broker fetch
	touch $@

test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(PYTEST_ARGS)

demo: setup
	$(BIN)/streamforest demo

broker-start: setup
	$(BIN)/streamforest broker start $(BROKER_ARGS)

broker-stop:
	$(BIN)/streamforest broker stop $(BROKER_ARGS)

bench: setup
	@set -e; for script in $(BENCH); do \
		echo "== $$script"; \
		$(BIN)/python $$script; \
	done

# podman's layer cache makes a second build take seconds when nothing changed
image: setup
	PYTHON=$(BIN)/python IMAGE=$(IMAGE) deploy/image/build.sh

deploy-test: image
	$(BIN)/python tests/deploy/group.py --image $(IMAGE):latest $(DEPLOY_ARGS)
