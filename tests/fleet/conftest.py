"""The fleet test runs only through `make test-fleet` (scripts/test_fleet.sh sets
SHARDFLOW_FLEET_TEST=1): `make test` and a bare `pytest tests` do not collect it, since it
brings up 16 upstream servers and a Celery Airflow and takes about 6 minutes."""

import os

if not os.environ.get("SHARDFLOW_FLEET_TEST"):
    collect_ignore_glob = ["test_*.py"]
