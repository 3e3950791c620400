"""How the suite is spread over pytest-xdist workers, and where its time went.

Spreading (``make test`` runs ``--dist loadgroup --no-loadscope-reorder``): a test module is one
unit of work, so its module-scoped fixtures run once, on one worker; the end-to-end tests are
one unit, because they share one Airflow (tests/e2e/conftest.py); dm_core's doctests are one.
Units go out longest first, by the seconds tests/durations.json records for each (a unit it
does not know counts as ``DEFAULT_S`` of its directory), so that no long unit starts last and
keeps one worker busy while the other idles.

Timing: the terminal summary shows the minutes per directory (test time summed over the
workers) and the wall clock; ``SHARDFLOW_RECORD_DURATIONS=1`` writes the seconds per unit of
this run to tests/durations.json.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DURATIONS = ROOT / "tests" / "durations.json"
DEFAULT_S = {"tests/e2e": 600.0, "tests/dm_cases": 30.0, "tests/integration": 30.0, "tests/unit": 1.0,
             "dm_core": 5.0}

_spent: dict[str, float] = defaultdict(float)
_tests: Counter = Counter()
_started = time.monotonic()


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: e2e, doctests, or its module (``dm_cases/test_gtid``)."""
    path = nodeid.split("@", 1)[0].split("::", 1)[0]
    if path.startswith("tests/e2e/"):
        return "e2e"
    if path.startswith("dm_core/"):
        return "doctests"
    return path.removeprefix("tests/").removesuffix(".py")


def area_of(nodeid: str) -> str:
    """The directory a test is reported under: tests/<dir>, or dm_core (the doctests)."""
    parts = nodeid.split("::", 1)[0].split("/")
    return "/".join(parts[:2]) if parts[0] == "tests" and len(parts) > 2 else parts[0]


def _known() -> dict[str, float]:
    try:
        return json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}


def _weight(unit: str, area: str, known: dict) -> float:
    return known.get(unit, DEFAULT_S.get(area, 30.0))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist turns the groups into node ids
def pytest_collection_modifyitems(config, items):
    # a worker's own config says dist "no" and carries the controller's choice as ``loadgroup``
    if not (getattr(config.option, "loadgroup", False) or config.getoption("dist", "no") == "loadgroup"):
        return
    known = _known()
    for item in items:
        item.add_marker(pytest.mark.xdist_group(unit_of(item.nodeid)))
    items.sort(key=lambda it: -_weight(unit_of(it.nodeid), area_of(it.nodeid), known))  # stable: keeps file order


def pytest_runtest_logreport(report):
    _spent[area_of(report.nodeid)] += report.duration
    _spent["unit:" + unit_of(report.nodeid)] += report.duration
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _tests[area_of(report.nodeid)] += 1


def pytest_terminal_summary(terminalreporter, config):
    areas = sorted(k for k in _spent if not k.startswith("unit:"))
    if not areas or os.environ.get("PYTEST_XDIST_WORKER"):   # the controller reports for every worker
        return
    workers = config.getoption("numprocesses", None) or 1
    tr = terminalreporter
    tr.section("minutes per directory")
    for a in areas:
        tr.write_line(f"{a:<20} {_tests[a]:>5} tests {_spent[a] / 60:7.1f} min")
    tr.write_line(f"{'all':<20} {sum(_tests.values()):>5} tests {sum(_spent[a] for a in areas) / 60:7.1f} min "
                  f"of test time; wall clock {(time.monotonic() - _started) / 60:.1f} min on {workers} worker(s)")
    if os.environ.get("SHARDFLOW_RECORD_DURATIONS") == "1":
        units = {k[5:]: round(v, 1) for k, v in sorted(_spent.items()) if k.startswith("unit:")}
        DURATIONS.write_text(json.dumps(units, indent=1, sort_keys=True) + "\n")
        tr.write_line(f"seconds per unit of work written to {DURATIONS.relative_to(ROOT)}")
