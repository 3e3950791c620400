"""dmctl's Airflow client and the API server's "Database error".

Airflow answers HTTP 500 with reason "Database error" when its metadata database aborted the
request (a deadlock between the API server and the scheduler over one run: CI saw it once on
`stop-task`). That cannot be caused on demand in a real Airflow, so a local HTTP server plays
the API server here, answering with the bodies Airflow 3 sends.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from dm_core.cli import airflow_api
from dm_core.cli.airflow_api import AirflowAPI
from dm_core.errors import ShardflowError

DB_ERROR = {"detail": {"reason": "Database error", "statement": "hidden", "orig_error": "hidden",
                       "message": "Serious error when handling your request. Check logs for more details"}}
OTHER_500 = {"detail": "Internal Server Error"}


class _Airflow:
    """Answers each PATCH with the next of ``answers`` ((status, body)), then 200."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.patches = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_PATCH(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.patches += 1
                status, body = outer.answers.pop(0) if outer.answers else (200, {"state": "success"})
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.api = AirflowAPI.with_token(f"http://127.0.0.1:{self.server.server_port}", "t")

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch):
    monkeypatch.setattr(airflow_api, "_DB_ERROR_BACKOFF", (0.0, 0.0, 0.0, 0.0))


@pytest.mark.parametrize("answers, patches, error", [
    # a database error that passes: the run is ended, no error reaches the user
    ([(500, DB_ERROR)], 2, None),
    ([(500, DB_ERROR)] * 4, 5, None),
    # one that does not pass: raised after the last try, saying so and what Airflow said
    ([(500, DB_ERROR)] * 5, 5, "the same after 5 tries"),
    # any other failure is raised at once
    ([(500, OTHER_500)], 1, "HTTP 500"),
    ([(400, {"detail": "bad state"})], 1, "bad state"),
])
def test_a_database_error_of_airflow_is_tried_again_and_anything_else_is_raised(answers, patches, error):
    af = _Airflow(answers)
    try:
        if error is None:
            af.api.end_run("dm_t_incremental", "manual__1", "success", "stopped by dmctl")
        else:
            with pytest.raises(ShardflowError) as e:
                af.api.end_run("dm_t_incremental", "manual__1", "success", "stopped by dmctl")
            assert error in str(e.value)
            assert "dm_t_incremental" in str(e.value)
        assert af.patches == patches
    finally:
        af.close()
