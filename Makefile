# inturn — every routine task has a target here; `make help` lists them.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
KAFKA_STAMP := $(VENV)/.kafka-jars
PYTEST_ARGS ?=

.PHONY: help setup test test-fast test-compat lint format demo bench docs chaos helm-check clean dev-up dev-down

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml scripts/setup-system.sh
	@scripts/setup-system.sh
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "inturn needs Python >= 3.11"'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install -q --upgrade pip
	@$(BIN)/pip install -q -e '.[dev]'
	@touch $@

$(KAFKA_STAMP): $(STAMP) devtools/inturn_devtools/kafka/pom.xml
	@$(BIN)/python -c 'from inturn_devtools.kafka import kafka_lib_dir; print("kafka jars:", kafka_lib_dir())'
	@touch $@

setup: $(STAMP) $(KAFKA_STAMP) ## create the venv, install dependencies, system packages, Kafka jars (idempotent)

test: setup ## run the test suite against real Kafka, PostgreSQL, Pub/Sub emulator and Spark
	$(BIN)/pytest -m 'not chaos' $(PYTEST_ARGS)

test-fast: setup ## the tests that need no server
	$(BIN)/pytest -m 'not kafka and not postgres and not pubsub and not spark and not chaos and not helm' $(PYTEST_ARGS)

# The lowest and the newest PySpark of the report's supported range (pyproject's `report` extra), each in a venv of
# its own under var/compat/, against the report's oracle tests.
COMPAT_PYSPARK ?= 4.0.0 4.3.0
test-compat: setup ## the report's oracle tests on the lowest and the newest PySpark it supports (CI: when scripts/report-changed.sh says so)
	for version in $(COMPAT_PYSPARK); do \
	  venv="var/compat/pyspark-$$version"; \
	  test -x "$$venv/bin/python" || $(PYTHON) -m venv "$$venv"; \
	  "$$venv/bin/pip" install -q -e '.[report]' "pyspark==$$version" 'pytest>=8.3' 'pytest-timeout>=2.3' \
	    'pytest-asyncio>=1.0' 'hypothesis>=6.120' 'msgspec>=0.19'; \
	  echo "pyspark $$version"; \
	  INTURN_TEST_SPARK_JARS=0 "$$venv/bin/pytest" tests/reports/test_transform.py tests/reports/test_arrow_pass.py tests/reports/test_small.py tests/reports/test_page.py \
	    $(PYTEST_ARGS) || exit 1; \
	done
	scripts/report-changed.sh --record

lint: setup ## ruff and mypy --strict; changes nothing
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: setup ## apply ruff's formatting and safe fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

demo: setup ## run the pipeline locally and show its result
	$(BIN)/inturn demo

bench: setup ## benchmarks: ratios against baselines measured in the same run (var/bench/*.json), then docs/benchmarks.md
	status=0; $(BIN)/python -m benchmarks.run $(BENCH_ARGS) || status=$$?; \
	$(BIN)/python -m benchmarks.write_docs; exit $$status

docs: setup ## regenerate docs/configuration.md from the settings classes
	$(BIN)/inturn config reference > docs/configuration.md

# The whole matrix (PYTEST_ARGS naming no test path) also rewrites the table of docs/reliability.md from the rows it
# recorded, passed or not; a part of it (PYTEST_ARGS with a tests/ path) leaves the document alone.
chaos: setup ## the fault matrix (kills, stops, restarts) against real services; the whole of it regenerates docs/reliability.md's table
	@mkdir -p var/chaos && rm -f var/chaos/rows.jsonl
	status=0; CHAOS_ROWS=var/chaos/rows.jsonl $(BIN)/pytest -m chaos $(PYTEST_ARGS) || status=$$?; \
	case "$(PYTEST_ARGS)" in \
	  *tests/*) echo "a part of the matrix: docs/reliability.md left as it is (rows in var/chaos/rows.jsonl)" ;; \
	  *) $(BIN)/python -m inturn_devtools.chaos_table var/chaos/rows.jsonl docs/reliability.md ;; \
	esac; \
	exit $$status

dev-up: setup ## start Kafka, PostgreSQL and the Pub/Sub emulator in the background
	$(BIN)/inturn dev up --detach

dev-down: ## stop what dev-up started
	$(BIN)/inturn dev down

helm-check: setup ## lint, render, validate and package the Helm chart; promtool check/test its rules; install/upgrade it on a real kube-apiserver; hadolint (helm, promtool, kube-apiserver built from the Go module proxy)
	@helm="$$(scripts/install-helm.sh)"; mkdir -p var/chart; "$$helm" package deploy/helm/inturn -d var/chart
	@scripts/install-promtool.sh >/dev/null
	@scripts/kube-apiserver.sh build >/dev/null
	@tools="$$($(BIN)/python -m tests.helm.chart tools)"; echo "hadolint Dockerfile"; "$$tools/hadolint" Dockerfile
	$(BIN)/pytest -m helm tests/helm $(PYTEST_ARGS)

clean: ## remove the venv and caches (not the Kafka jar cache in ~/.cache/inturn)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis var reports $(COMPILED)
	find libs services -name "*.so" -delete
