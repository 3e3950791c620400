"""The "Migrations" page of the Airflow UI (an Airflow 3 plugin: a FastAPI app at /shardflow
and a nav entry that embeds it). Module names are unique on purpose: Airflow imports every
.py file of the plugins folder by its bare file name."""
