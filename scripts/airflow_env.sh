# Sourced by scripts/airflow.sh (`airflow standalone`) and scripts/airflow_celery.sh (the
# CeleryExecutor): the environment every Airflow process of the local stack runs with. Needs ROOT.
eval "$("$ROOT/scripts/stack.sh" env)"
export AIRFLOW_HOME=${AIRFLOW_HOME:-$SHARDFLOW_AIRFLOW_HOME}
PORT=$SHARDFLOW_AIRFLOW_PORT

export PATH="$ROOT/.venv/bin:$PATH"
export PYTHONPATH="$ROOT:$ROOT/plugins${PYTHONPATH:+:$PYTHONPATH}"
export SPARK_HOME=$("$ROOT/.venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="postgresql+psycopg2://postgres@127.0.0.1:$SHARDFLOW_PG_PORT/airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$ROOT/dags"
export AIRFLOW__CORE__PLUGINS_FOLDER="$ROOT/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__PARALLELISM=${AIRFLOW__CORE__PARALLELISM:-16}
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin"
export AIRFLOW__API__PORT=$PORT
export AIRFLOW__API__HOST=127.0.0.1
export AIRFLOW__API__BASE_URL="http://127.0.0.1:$PORT"
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://127.0.0.1:$PORT/execution/"
export AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL=5
# Airflow's default pass over the DAG files (30 s): dmctl start-task asks for its task's DAGs at once
# (parseDagFile); a pass every 5 s cost the dag-processor 13% of a core with one task
export AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL=${AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL:-30}
export AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT=1200
# a SIGKILLed task is noticed and retried within a minute, not five
export AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT=${AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT:-60}
# after a restart, the tasks of the dead scheduler are reset (and the sources resume) at the first
# check after its heartbeat is 30 s old: within 45 s of its death, not five minutes (one query a check)
export AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL=${AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL:-15}
# on a loaded 2-core machine the API server answers a task's first call in more than the
# default 5 s, and the task fails before it starts
export AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT=${AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT:-30}
export AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[2]"}'
# Spark jobs go to the stack's job host, started (or restarted: dead, older code) by the first
# job that finds none: Spark's start-up paid once, not per job (docs/operations.md)
export SHARDFLOW_JOB_HOST=${SHARDFLOW_JOB_HOST:-start}
