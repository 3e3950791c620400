"""Airflow side of shardflow: thin operators and sensors that resolve connections and call dm_core."""
