"""The validation settings of one task, from DM's ``validators`` block.

DM runs one continuous validator per source; shardflow validates the merged target tables,
which mix rows of every source, so one task has one validation (``dm_<task>_validate``)
and its instances' validators must agree on mode, schedule and start time (the config
loader checks it). The first instance with a mode other than ``none`` gives the settings.
With every instance at ``none`` the DAG still exists, unscheduled, for runs on demand in
mode ``full``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from dm_core.config.units import ValidatorConfig, size_bytes, start_time
from dm_core.validate.recheck import Settings


@dataclass
class ValidationSettings:
    mode: str = "full"                  # full | fast
    enabled: bool = False               # some instance sets mode full/fast
    schedule: str | None = None         # cron / preset of dm_<task>_validate
    start: dt.datetime | None = None    # no scheduled run before this
    repair: bool = False                # differences found trigger dm_<task>_resync (dm_core/resync)
    worker_count: int = 4               # tables looked into at once; worker_count // 2 (>= 2) queries per server
    meta_flush_interval: float = 300.0  # seconds between partial results written to the store
    max_pending_row_count: int = 10000
    max_pending_row_size: int = 500 << 20
    recheck: Settings = None

    def __post_init__(self):
        if self.recheck is None:
            self.recheck = Settings()


def settings_for(task) -> ValidationSettings:
    chosen = next((i.validator for i in task.mysql_instances if i.validator.mode != "none"), None)
    v = chosen or ValidatorConfig()
    return ValidationSettings(
        mode=v.mode if chosen else "full", enabled=chosen is not None,
        schedule=(v.schedule or None) if chosen else None,
        start=start_time(v.start_time) if v.start_time else None, repair=bool(v.repair) if chosen else False,
        worker_count=v.worker_count, meta_flush_interval=v.meta_flush_interval,
        max_pending_row_count=v.max_pending_row_count, max_pending_row_size=size_bytes(v.max_pending_row_size),
        recheck=Settings(row_error_delay=v.row_error_delay, check_interval=v.check_interval,
                         batch_query_size=v.batch_query_size))
