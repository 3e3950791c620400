"""The job host: one long-lived Spark application per machine that runs shardflow's Spark jobs
(the full load, the validation, the re-sync's comparison) one after another, so that only its
first job pays Spark's start-up (JVM, SparkContext, the executors' Python workers: 5-8 s per
spark-submit on a 2-core machine; a job on the running host starts in about 0.1 s).

Stages, one module each:

=========== ==========================================================================
wire.py     where a host listens (a Unix socket in a private directory) and the framing:
            one JSON object per line, both ways
server.py   the host's side: accepts jobs from any number of clients, runs them one at a
            time (the others queue, and the host's log says so), streams each job's log
            lines back to its client while it runs
client.py   a job sent to the host: its log lines to a callback, its exit code back
route.py    whether a job goes to the host or to a spark-submit of its own, and why
service.py  start (waiting or detached), stop, status of a machine's host; restarts a dead one
=========== ==========================================================================

The Spark side (which jobs exist, the SparkContext, capturing a job's log) is
spark_jobs/job_host.py; the Airflow side is plugins/shardflow_airflow/spark_job.py.

Guarantees and limits:

- A job on the host does what the same job does under spark-submit: the driver code is the
  same (``run_on`` of each job), only the application is shared. Its driver environment is the
  client's ``SHARDFLOW_*`` variables, for that job only.
- One SparkContext: jobs do not run at once (a job's log capture and its driver environment
  are the process's); the executors' environment, the master and the Spark conf are fixed when
  the host starts. A job that needs any of those of its own (a fault point armed on executors,
  another master, another conf) keeps spark-submit (route.py).
- A host killed mid-job (kill -9, OOM) ends its clients' jobs with an error; each job's
  progress is recorded after its commits (dm_core/full/chunk_writer.py), so the rerun, on a
  new host or with spark-submit, loads only the rest.
- A job lives as long as its client: when the client goes away (the Airflow task stopped by
  dmctl stop-task or marked failed, or its process died), a queued job is not started and a
  running one is cancelled, as spark-submit's process is killed with its task. A cancelled job
  keeps the slot until it has returned, so a rerun queues behind it and two loads of one task
  never run at once; what it recorded is kept.
- Who may send jobs: the socket lives in a directory only its owner can enter, and the host
  also checks the peer's user id (SO_PEERCRED): a job's environment carries the state store's
  DSN, so nobody else may connect.
"""
