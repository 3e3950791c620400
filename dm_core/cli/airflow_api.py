"""A small client of Airflow 3's REST API (what dmctl needs: DAGs, runs, task instances,
unpause, trigger, ending runs and task instances).

Where: SHARDFLOW_AIRFLOW_URL (default http://127.0.0.1:8080). Who: SHARDFLOW_AIRFLOW_USER /
SHARDFLOW_AIRFLOW_PASSWORD, else the simple auth manager's generated password file in
$AIRFLOW_HOME (what `airflow standalone` writes).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

from dm_core.errors import ErrorCode

# seconds between the tries of a request Airflow's database aborted (_call)
_DB_ERROR_BACKOFF = (0.5, 1.0, 2.0, 4.0)


class _TransientDatabaseError(Exception):
    pass


class AirflowAPI:
    def __init__(self, url: str | None = None, user: str | None = None, password: str | None = None):
        self.url = (url or os.environ.get("SHARDFLOW_AIRFLOW_URL")
                    or f"http://127.0.0.1:{os.environ.get('SHARDFLOW_AIRFLOW_PORT', '8080')}").rstrip("/")
        self.user = user or os.environ.get("SHARDFLOW_AIRFLOW_USER") or "admin"
        self._password = password or os.environ.get("SHARDFLOW_AIRFLOW_PASSWORD") or self._generated_password()
        self._token: str | None = None

    @classmethod
    def with_token(cls, url: str, token: str) -> "AirflowAPI":
        """A client acting as the user who holds ``token`` (a JWT the API server issued)."""
        api = cls(url=url, user="-", password="-")
        api._token = token
        return api

    def _generated_password(self) -> str:
        # AIRFLOW_HOME, else the local stack's (make airflow-up), else Airflow's default
        root = Path(__file__).resolve().parents[2]
        stack = Path(os.environ.get("SHARDFLOW_STACK_DIR") or root / ".stack")
        for home in (os.environ.get("AIRFLOW_HOME"), stack / "airflow", Path.home() / "airflow"):
            if not home:
                continue
            try:
                pw = json.loads((Path(home) / "simple_auth_manager_passwords.json.generated").read_text()).get(self.user)
            except (OSError, ValueError):
                continue
            if pw:
                return pw
        return ""

    def _call(self, method: str, path: str, body: dict | None = None, auth: bool = True, *,
              conflict_ok: bool = False):
        # Airflow answers 500 "Database error" when its metadata database aborted the request's
        # transaction, as Postgres does to one side of a deadlock between the API server and the
        # scheduler writing the same run. Nothing was written, and the same request goes through
        # a moment later; anything else, or the same error after the last try, is raised.
        for delay in (*_DB_ERROR_BACKOFF, None):
            try:
                return self._call_once(method, path, body, auth, conflict_ok=conflict_ok)
            except _TransientDatabaseError as e:
                if delay is None:
                    raise ErrorCode.AIRFLOW_API.error(
                        f"{e} (the same after {len(_DB_ERROR_BACKOFF) + 1} tries)") from None
                time.sleep(delay)

    def _call_once(self, method: str, path: str, body: dict | None, auth: bool, *, conflict_ok: bool):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if auth:
            req.add_header("Authorization", f"Bearer {self.token()}")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:  # a loaded API server is slow, not gone
                raw = r.read()
                return json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            if e.code == 404 or (e.code == 409 and conflict_ok):
                return None
            detail = e.read().decode(errors="replace")[:500]
            if e.code == 500 and _is_database_error(detail):
                raise _TransientDatabaseError(f"Airflow {method} {path}: HTTP {e.code}: {detail}") from None
            raise ErrorCode.AIRFLOW_API.error(f"Airflow {method} {path}: HTTP {e.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as e:
            raise ErrorCode.AIRFLOW_API.error(f"cannot reach Airflow at {self.url}: {e}") from None

    def token(self) -> str:
        if self._token is None:
            out = self._call("POST", "/auth/token", {"username": self.user, "password": self._password}, auth=False)
            if not out or "access_token" not in out:
                raise ErrorCode.AIRFLOW_API.error(f"Airflow at {self.url} refused the login of {self.user!r}")
            self._token = out["access_token"]
        return self._token

    def down_components(self) -> list[str]:
        """Airflow's components its health check calls unhealthy (scheduler, triggerer,
        dag_processor, metadatabase), each with its last heartbeat: a component that died
        leaves the API server answering while nothing schedules or retries a task."""
        health = self._call("GET", "/api/v2/monitor/health", auth=False) or {}
        return [f"{name} (last heartbeat {(part or {}).get(next((k for k in (part or {}) if 'heartbeat' in k), ''))})"
                for name, part in health.items()
                if isinstance(part, dict) and part.get("status") not in (None, "healthy")]

    def dag(self, dag_id: str) -> dict | None:
        return self._call("GET", f"/api/v2/dags/{dag_id}")

    def parse_again(self, dag_id: str) -> bool:
        """Ask the dag-processor to read the file that defines ``dag_id`` again now (Airflow's
        parseDagFile), rather than on its next pass; False when that DAG is not loaded."""
        dag = self.dag(dag_id)
        if not dag or not dag.get("file_token"):
            return False
        self._call("PUT", f"/api/v2/parseDagFile/{dag['file_token']}")
        return True

    def import_errors(self) -> list[dict]:
        out = self._call("GET", "/api/v2/importErrors?limit=100") or {}
        return out.get("import_errors", [])

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self._call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": paused})

    def trigger(self, dag_id: str, conf: dict | None = None) -> dict:
        return self._call("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf or {}})

    def runs(self, dag_id: str, limit: int = 5) -> list[dict]:
        out = self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns?order_by=-run_after&limit={limit}") or {}
        return out.get("dag_runs", [])

    def dag_ids(self, prefix: str = "") -> list[str]:
        """Ids of the DAGs Airflow has loaded whose id starts with ``prefix``."""
        from urllib.parse import quote

        out = self._call("GET", f"/api/v2/dags?limit=1000&dag_id_pattern={quote(prefix + '%', safe='')}") or {}
        return [d["dag_id"] for d in out.get("dags", []) if d["dag_id"].startswith(prefix)]

    def runs_of(self, dag_ids: list[str], limit: int = 100) -> list[dict]:
        """Runs of several DAGs, newest first (one call)."""
        out = self._call("POST", "/api/v2/dags/~/dagRuns/list",
                         {"dag_ids": dag_ids, "order_by": "-run_after", "page_limit": limit}) or {}
        return out.get("dag_runs", [])

    def run(self, dag_id: str, run_id: str) -> dict | None:
        return self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}")

    def variable(self, key: str) -> str | None:
        out = self._call("GET", f"/api/v2/variables/{key}")
        return None if out is None else out.get("value")

    def active_runs(self, dag_id: str) -> list[dict]:
        """Runs of ``dag_id`` that are queued or running (oldest first)."""
        out = self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns?state=queued&state=running&order_by=run_after"
                                "&limit=100") or {}
        return out.get("dag_runs", [])

    def end_run(self, dag_id: str, run_id: str, state: str, note: str) -> None:
        """Set a run to ``state`` (success | failed): Airflow kills its running task instances
        and skips the pending ones."""
        self._call("PATCH", f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}", {"state": state, "note": note})

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        out = self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances?limit=100") or {}
        return out.get("task_instances", [])

    def task_instances_of(self, dag_ids: list[str], states: list[str], limit: int = 1000) -> list[dict]:
        """Task instances of several DAGs' runs in ``states`` (one call)."""
        out = self._call("POST", "/api/v2/dags/~/dagRuns/~/taskInstances/list",
                         {"dag_ids": dag_ids, "state": states, "page_limit": limit}) or {}
        return out.get("task_instances", [])

    def end_task(self, dag_id: str, run_id: str, task_id: str, state: str, note: str) -> None:
        """Set one task instance to ``state`` (success | failed | skipped); a running one is killed.
        One that finished meanwhile (Airflow answers 409 "already in ... state": a sensor that saw
        the stop ended itself) is left as it is: it has ended, which is what was asked."""
        self._call("PATCH", f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}",
                   {"new_state": state, "note": note}, conflict_ok=True)

    def clear_tasks(self, dag_id: str, run_id: str, task_ids: list[str]) -> None:
        """Run ``task_ids`` of a run again (their run becomes active again if it had ended)."""
        self._call("POST", f"/api/v2/dags/{dag_id}/clearTaskInstances",
                   {"dry_run": False, "dag_run_id": run_id, "task_ids": task_ids, "only_failed": False,
                    "reset_dag_runs": True})


def _is_database_error(body: str) -> bool:
    """Whether an HTTP 500's body is the API server's answer to an exception of its database."""
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        return False
    return isinstance(detail, dict) and detail.get("reason") == "Database error"


def _q(run_id: str) -> str:
    from urllib.parse import quote

    return quote(run_id, safe="")
