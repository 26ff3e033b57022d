# streamforest developer entry points. Needs Python 3.11, a Java 17+ runtime and Maven (for the local broker).
#
#   make setup          .venv with the project (editable) and its test extra, broker jars in the cache and
#                       every numba kernel compiled into the cache (streamforest warmup)
#   make helm           helm for the chart tests and helm-template (built from its Go module when Go is
#                       installed, minutes once, then cached); make test and test-fast build it, demo does not
#   make test           lint (ruff) and the whole test suite, docstring examples included, on two pytest-xdist
#                       workers (integration tests start a local Kafka broker per worker on free ports); about
#                       13-15 minutes of pytest on two cores from a fresh clone (setup compiles the kernels first)
#   make test-fast      lint and the tests that need no broker and are not marked slow (no Kafka, no long
#                       accuracy runs), on two workers: under 3 minutes once setup has compiled the kernels
#   make demo           the demo
#   make broker-start   a local Kafka broker on BROKER_PORT (default 9092) in the background; make broker-stop
#   make bench          the benchmark scripts tests/benchmarks/*/bench_*.py (installs the bench extra:
#                       capymoa, which runs MOA for them; a Java 17+ runtime)
#   make image          the worker image with podman (deploy/image/build.sh; root, podman, runc, debootstrap)
#   make deploy-test    the image if needed, then three worker containers in one group, killed, scaled
#                       and stopped, every output checked (tests/deploy/group.py; outside `make test`)
#
#   make helm-template  render the Helm chart with its default values (HELM_VALUES=file for others)
#
# Variables: PYTHON (interpreter for the venv), VENV, PYTEST_ARGS (e.g. PYTEST_ARGS='-k restore'),
# PYTEST_WORKERS (pytest-xdist workers of make test and test-fast, default 2; 0 runs in one process),
# BROKER_PORT, CONTROLLER_PORT, BENCH (benchmark scripts to run), HELM_VALUES, IMAGE (worker image name),
# DEPLOY_ARGS (e.g. DEPLOY_ARGS='--out tests/benchmarks/service/results/deploy.md').

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
PYTEST_WORKERS ?= 2
# tests that share a module-scoped fixture stay on one worker (tests/conftest.py marks them)
XDIST := -n $(PYTEST_WORKERS) --dist loadgroup
BROKER_PORT ?= 9092
CONTROLLER_PORT ?= 9093
BROKER_ARGS := --port $(BROKER_PORT) --controller-port $(CONTROLLER_PORT)
BENCH ?= $(wildcard tests/benchmarks/*/bench_*.py)
IMAGE ?= localhost/streamforest
DEPLOY_ARGS ?=

# stamps: reinstall only when pyproject.toml changes, fetch the jars again only when the pom changes,
# run the warm-up again only when a source of the core, the contracts or the worker changes (it then
# compiles the kernels whose sources or imported modules changed: models/core/_jit.py stamps each cached
# kernel so)
INSTALLED := $(VENV)/.installed
FETCHED := $(VENV)/.kafka-fetched
WARMED := $(VENV)/.warmed
WARMUP_SOURCES := $(wildcard models/*.py models/*/*.py schemas/*.py worker/*.py worker/*/*.py)

.PHONY: setup test test-fast demo broker-start broker-stop bench helm helm-template image deploy-test

setup: $(INSTALLED) $(FETCHED) $(WARMED)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# the runtime dependencies at the image's pinned versions (deploy/docker/requirements.txt): the
# tests' golden digests are those of the versions users run (tests/determinism/)
$(INSTALLED): pyproject.toml deploy/docker/requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c deploy/docker/requirements.txt -e '.[test]'
	touch $@

$(FETCHED): deploy/local-kafka/pom.xml $(INSTALLED)
	$(BIN)/streamforest broker fetch
	touch $@

# helm is built by `go install` from the Go module proxy (about 3-4 minutes once, then reused from
# ~/.cache/streamforest/bin: the script returns at once when the cached binary has the pinned version).
# Without Go nothing is built and the chart tests fail saying so, unless helm is on the PATH or in $$HELM.
helm:
	@if command -v go >/dev/null 2>&1; then \
		deploy/helm/get-helm.sh >/dev/null; \
	elif ! command -v helm >/dev/null 2>&1 && [ -z "$$HELM" ]; then \
		echo "helm: Go is not installed: helm was not built, tests/unit/test_helm_chart.py will fail" \
			"(install Go, put helm on the PATH, or set STREAMFOREST_TEST_NO_HELM=1 to skip those tests)" >&2; \
	fi

helm-template: helm
	"$$(deploy/helm/get-helm.sh)" template streamforest deploy/helm/streamforest $(if $(HELM_VALUES),--values $(HELM_VALUES))

# a fresh install then serves its first prediction without waiting for numba compilation, and every
# command starts without compiling the project's modules first: under PYTHONDONTWRITEBYTECODE (which
# containers and CI runners often set) Python writes no bytecode of its own, and each process would
# compile them again (a third of a second of each command's start)
$(WARMED): $(WARMUP_SOURCES) $(INSTALLED)
	$(BIN)/python -m compileall -q worker models schemas
	$(BIN)/streamforest warmup
	touch $@

test: setup helm
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

test-fast: setup helm
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(XDIST) -m "not kafka and not slow" $(PYTEST_ARGS)

demo: setup
	$(BIN)/streamforest demo

broker-start: setup
	$(BIN)/streamforest broker start $(BROKER_ARGS)

broker-stop:
	$(BIN)/streamforest broker stop $(BROKER_ARGS)

# the benchmarks run MOA through capymoa (the bench extra), besides river of the test extra
bench: setup
	$(BIN)/python -m pip install --quiet -c deploy/docker/requirements.txt -e '.[test,bench]'
	@set -e; for script in $(BENCH); do \
		echo "== $$script"; \
		$(BIN)/python $$script; \
	done

# podman's layer cache makes a second build take seconds when nothing changed
image: setup
	PYTHON=$(BIN)/python IMAGE=$(IMAGE) deploy/image/build.sh

deploy-test: image
	$(BIN)/python tests/deploy/group.py --image $(IMAGE):latest $(DEPLOY_ARGS)
