SHELL := /bin/bash
ROOT := $(CURDIR)
VENV := $(ROOT)/.venv
export PATH := $(VENV)/bin:$(PATH)
export PYTHONPATH := $(ROOT)
export SPARK_HOME := $(ROOT)/.venv/lib/python3.11/site-packages/pyspark

.PHONY: setup stack-up stack-down stack-status job-host-up job-host-down airflow-up airflow-down lint test test-unit demo bench \
	fleet-up fleet-down airflow-celery-up airflow-celery-down test-fleet

setup:          ## install apt packages and the venv (idempotent)
	scripts/setup.sh

stack-up:       ## start upstream MariaDB x2, downstream, Postgres on loopback
	scripts/stack.sh up

stack-down:
	scripts/stack.sh down

stack-status:
	scripts/stack.sh status

job-host-up:    ## the stack's Spark job host: full loads and validations skip Spark's start-up (docs/operations.md)
	scripts/stack.sh job-host start

job-host-down:
	scripts/stack.sh job-host stop

airflow-up:     ## airflow standalone on the stack's Postgres, with dags/ and plugins/
	scripts/airflow.sh up

airflow-down:
	scripts/airflow.sh down

airflow-celery-up:  ## Airflow with the CeleryExecutor instead: scheduler, api-server, dag-processor, triggerer, 2 Celery workers (Redis broker)
	scripts/airflow_celery.sh up

airflow-celery-down:
	scripts/airflow_celery.sh down

fleet-up:       ## N upstream MariaDB servers (default 16) on 127.0.0.1:21000.. for the fleet test: scripts/fleet.sh
	scripts/fleet.sh up $(or $(N),16)

fleet-down:
	scripts/fleet.sh down

test-fleet:     ## (not in make test, ~6 min) 16 upstreams + Celery Airflow, 2 workers, one killed: lag p99, RSS per source
	scripts/test_fleet.sh

lint:           ## pyflakes' rules (ruff) over the product and the tests: zero findings
	$(VENV)/bin/ruff check .

test:           ## lint, then the whole suite on 3 workers (unit, integration, DM cases, e2e, doctests): scripts/test.sh
	scripts/test.sh

test-unit:
	$(VENV)/bin/python -m pytest tests/unit

demo:           ## the seed example migration, end to end through Airflow
	scripts/demo.sh

bench:
	$(VENV)/bin/python -m bench.run
