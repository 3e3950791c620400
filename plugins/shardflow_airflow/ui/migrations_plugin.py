"""Registers the Migrations page with Airflow: the FastAPI app (``/shardflow``) and a nav
entry (``/plugin/migrations``) that shows it inside the Airflow UI."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

URL_PREFIX = "/shardflow"


class ShardflowMigrationsPlugin(AirflowPlugin):
    name = "shardflow_migrations"
    external_views = [{
        "name": "Migrations",
        "href": f"{URL_PREFIX}/",
        "url_route": "migrations",
        "destination": "nav",
        "category": "browse",
    }]

    @property
    def fastapi_apps(self):  # built lazily: only the API server needs it
        from shardflow_airflow.ui.migrations_app import create_app

        return [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "shardflow migrations"}]
