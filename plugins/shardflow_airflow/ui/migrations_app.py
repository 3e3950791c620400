"""The Migrations page: a FastAPI app mounted in Airflow's API server at ``/shardflow``.

Routes: ``GET /`` the page (HTML, rendered on the server, refreshes itself), ``GET /api/tasks``
the same data as JSON, ``POST /api/actions`` trigger one of a task's actions, ``GET /metrics``
every task's metrics in Prometheus' text format (dm_core/metrics), read from the state store.

Auth: every route but /metrics needs a logged-in Airflow user -- the same JWT the Airflow UI keeps in its
``_token`` cookie (or a bearer token), checked by Airflow's own ``get_user``; a page request
without one is sent to Airflow's login page and comes back after. Reading needs DAG read
access; an action is carried out by calling Airflow's REST API *with the user's own token*,
so Airflow decides whether this user may trigger that DAG, and only actions the page itself
offers for the task (dm_core/overview.py) are accepted.

Data: the state store (dm_core/overview.py), the newest run of each of the task's DAGs and the
sensors waiting to be run (a source waiting for a worker slot) from Airflow's REST API. No
password is read or shown.

/metrics is for Prometheus, which cannot log in to Airflow: open, as DM's /metrics are, unless
SHARDFLOW_METRICS_TOKEN is set; then it needs ``Authorization: Bearer <that token>``. It
shows task and source names, positions and counts, never server addresses or statements.
"""

from __future__ import annotations

import datetime as dt
import functools
from pathlib import Path

from fastapi import Request  # at module level: FastAPI resolves the (string) annotations here

TEMPLATES = Path(__file__).with_name("templates")
KINDS = ("precheck", "full", "incremental", "validate", "resync")


def _api(request, token: str):
    from airflow.configuration import conf

    from dm_core.cli.airflow_api import AirflowAPI

    base = (conf.get("api", "base_url", fallback="") or str(request.base_url)).rstrip("/")
    return AirflowAPI.with_token(base, token)


def _token(request) -> str:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:]
    return request.cookies.get("_token", "")


def _runs(api, names: list[str]) -> dict[str, dict]:
    """task → {DAG kind → state of its newest run}, in one call of Airflow's batch endpoint."""
    from dm_core.state.lifecycle import dag_id

    ids = {dag_id(n, k): (n, k) for n in names for k in KINDS}
    out: dict[str, dict] = {n: {} for n in names}
    if not ids:
        return out
    got = api.runs_of(list(ids), limit=1000)
    for r in got:  # newest first: keep the first run seen of each DAG
        n, k = ids.get(r.get("dag_id"), (None, None))
        if n is not None and k not in out[n]:
            out[n][k] = r.get("state")
    return out


def _sensors(api, names: list[str], runs: dict[str, dict]) -> dict[str, dict]:
    """task → {task id → task instance} of the sensors waiting (scheduled or queued) in its
    running incremental run, in one call; dm_core/slot_wait.py decides which wait for a slot."""
    from dm_core.slot_wait import WAITING_STATES
    from dm_core.state.lifecycle import dag_id

    ids = {dag_id(n, "incremental"): n for n in names if runs[n].get("incremental") == "running"}
    out: dict[str, dict] = {n: {} for n in names}
    if ids:
        for ti in api.task_instances_of(list(ids), list(WAITING_STATES)):
            n = ids.get(ti.get("dag_id"))
            if n is not None:
                out[n][ti.get("task_id")] = ti
    return out


def overview(request, token: str) -> list[dict]:
    from dm_core.overview import task_overview
    from dm_core.state import lifecycle
    from shardflow_airflow import runtime

    api = _api(request, token)
    known = set(api.dag_ids("dm_"))
    with runtime.open_store() as store:
        # tasks whose file Airflow no longer has (removed, or left by tests) are not shown
        names = [n for n, _ in store.list_tasks()
                 if lifecycle.dag_id(n, "precheck") in known or lifecycle.dag_id(n, "validate") in known]
        runs = _runs(api, names)
        sensors = _sensors(api, names, runs)
        return [task_overview(store, n, runs[n], sensors[n]) for n in names]


def sparkline(points: list[float | None], width: int = 220, height: int = 40) -> str:
    """SVG polyline points for values (None skipped), scaled to the box; '' when empty."""
    vals = [p for p in points if p is not None]
    if not vals:
        return ""
    top = max(vals) or 1.0
    step = width / max(1, len(points) - 1)
    return " ".join(f"{i * step:.1f},{height - (p / top) * (height - 2) - 1:.1f}" for i, p in enumerate(points)
                    if p is not None)


@functools.lru_cache(maxsize=1)   # one compiled template for every request
def _env():
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["html"]))
    env.filters["sparkline"] = sparkline
    env.filters["rates"] = lambda w: [x["rows"] / x["seconds"] if x["seconds"] else 0.0 for x in w]
    env.filters["num"] = lambda v, d=1: "–" if v is None else f"{v:,.{d}f}"
    env.filters["when"] = lambda v: "–" if not v else str(v).replace("T", " ")[:19]
    return env


def render_page(tasks: list[dict], user: str, env=None) -> str:
    """The page's HTML for ``tasks`` (``overview``'s list)."""
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (env or _env()).get_template("migrations.html").render(tasks=tasks, user=user, now=now)


def create_app():
    from fastapi import Depends, FastAPI, HTTPException
    from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

    app = FastAPI(title="shardflow migrations", docs_url=None, redoc_url=None, openapi_url=None)
    env = _env()

    async def user_or_none(request: Request):
        from airflow.api_fastapi.core_api.security import resolve_user_from_token

        token = _token(request)
        if not token:
            return None
        try:
            return await resolve_user_from_token(token)
        except HTTPException:
            return None

    def may_read(user) -> bool:
        from airflow.api_fastapi.app import get_auth_manager

        return get_auth_manager().is_authorized_dag(method="GET", user=user)

    @app.get("/", response_class=HTMLResponse)
    def page(request: Request, user=Depends(user_or_none)):
        if user is None:
            from airflow.api_fastapi.app import get_auth_manager

            return RedirectResponse(get_auth_manager().get_url_login(next_url=str(request.url)), status_code=302)
        if not may_read(user):
            return HTMLResponse("You may not read DAGs, so not the migrations either.", status_code=403)
        return HTMLResponse(render_page(overview(request, _token(request)), getattr(user, "get_name", lambda: "")(),
                                        env))

    @app.get("/api/tasks")
    def tasks(request: Request, user=Depends(user_or_none)):
        if user is None:
            raise HTTPException(401, "log in to Airflow first")
        if not may_read(user):
            raise HTTPException(403, "no read access to DAGs")
        from fastapi.encoders import jsonable_encoder

        return JSONResponse(jsonable_encoder({"tasks": overview(request, _token(request))}),
                            headers={"Cache-Control": "no-store"})

    @app.get("/metrics")
    def metrics(request: Request):
        import hmac
        import os

        from fastapi.responses import Response

        from dm_core.metrics.collector import exposition
        from shardflow_airflow import runtime

        want = os.environ.get("SHARDFLOW_METRICS_TOKEN", "")
        if want and not hmac.compare_digest(request.headers.get("authorization", ""), f"Bearer {want}"):
            raise HTTPException(401, "/metrics needs Authorization: Bearer $SHARDFLOW_METRICS_TOKEN")
        body, content_type = exposition(runtime.open_store)
        return Response(body, media_type=content_type, headers={"Cache-Control": "no-store"})

    @app.post("/api/actions")
    async def act(request: Request, user=Depends(user_or_none)):
        if user is None:
            raise HTTPException(401, "log in to Airflow first")
        if request.headers.get("x-shardflow-action") != "1":  # a cross-site form cannot set it
            raise HTTPException(400, "actions are sent by the Migrations page")
        body = await request.json()
        import anyio

        return await anyio.to_thread.run_sync(lambda: _trigger(request, body))

    return app


def _trigger(request, body: dict) -> dict:
    from fastapi import HTTPException

    from dm_core.errors import ShardflowError
    from dm_core.overview import task_overview
    from shardflow_airflow import runtime

    name, dag_id, conf = body.get("task"), body.get("dag_id"), body.get("conf") or {}
    with runtime.open_store() as store:
        if store.get_task(name or "") is None:
            raise HTTPException(404, f"no task {name!r}")
        offered = task_overview(store, name, {})["actions"]
    if not any(a["dag_id"] == dag_id and a["conf"] == conf for a in offered):
        raise HTTPException(400, f"task {name} offers no such action (the page may be stale: reload it)")
    api = _api(request, _token(request))
    try:
        run = api.trigger(dag_id, conf)
    except ShardflowError as e:
        raise HTTPException(502, str(e).splitlines()[0]) from None
    return {"dag_id": dag_id, "dag_run_id": (run or {}).get("dag_run_id"), "state": (run or {}).get("state")}
