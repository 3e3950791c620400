"""What a precheck says: one ``CheckResult`` per item and server, gathered in a ``CheckReport``.

    >>> r = CheckReport([CheckResult("binlog_format", FAIL, "mysql-01", None,
    ...                              "binlog_format is STATEMENT", "SET GLOBAL binlog_format='ROW'")])
    >>> r.ok
    False
    >>> print(r.render())
    [FAIL] binlog_format @ source mysql-01: binlog_format is STATEMENT fix: SET GLOBAL binlog_format='ROW'
    precheck: 1 failed, 0 warnings, 0 passed
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from dm_core.errors import ErrorCode, ShardflowError

PASS, WARN, FAIL = "pass", "warn", "fail"
IGNORED_TAG = "(ignored)"


@dataclass
class CheckResult:
    item: str                 # DM's check-item name ("binlog_row_image"), or "connection"
    state: str                # "pass" | "warn" | "fail"
    source: str | None        # a source-id, "target", or None for task-wide items (shard groups)
    table: str | None         # "`schema`.`table`" (prefixed "source-id:" across sources) or None
    message: str              # what was found; never a password or a SHOW GRANTS line
    fix: str = ""             # what to do about it
    ignored: bool = False     # a failure that ignore-checking-items turned into a warning

    def to_dict(self) -> dict:
        return asdict(self)

    def render(self) -> str:
        if self.source is None:
            where = "task"
        elif self.source == "target":
            where = "target"
        else:
            where = f"source {self.source}"
        line = f"[{self.state.upper()}] {self.item} @ {where}: {self.message}"
        return f"{line} fix: {self.fix}" if self.fix and self.state != PASS else line


@dataclass
class CheckReport:
    results: list[CheckResult] = field(default_factory=list)
    task: str = ""

    @property
    def errors(self) -> list[CheckResult]:
        return [r for r in self.results if r.state == FAIL]

    @property
    def warnings(self) -> list[CheckResult]:
        return [r for r in self.results if r.state == WARN]

    @property
    def passed(self) -> list[CheckResult]:
        return [r for r in self.results if r.state == PASS]

    @property
    def ok(self) -> bool:
        """No failure is left once ignore-checking-items has been applied."""
        return not self.errors

    def find(self, item: str, source: str | None = "*") -> list[CheckResult]:
        """Results of one item (of one source if given): handy in tests and the CLI."""
        return [r for r in self.results if r.item == item and (source == "*" or r.source == source)]

    def summary(self) -> str:
        head = f"precheck of task {self.task}" if self.task else "precheck"
        return (f"{head}: {len(self.errors)} failed, {len(self.warnings)} warning{'' if len(self.warnings) == 1 else 's'}, "
                f"{len(self.passed)} passed")

    def render(self) -> str:
        """One line per failure and warning (failures first), then a summary line."""
        lines = [r.render() for r in self.errors + self.warnings]
        lines.append(self.summary())
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"task": self.task, "ok": self.ok,
                "counts": {FAIL: len(self.errors), WARN: len(self.warnings), PASS: len(self.passed)},
                "results": [r.to_dict() for r in self.results]}

    def raise_for_errors(self) -> None:
        """Raise PRECHECK_FAILED listing every failure, if there is any."""
        if not self.ok:
            raise self.error()

    def error(self) -> ShardflowError:
        body = "\n".join(r.render() for r in self.errors)
        return ErrorCode.PRECHECK_FAILED.error(f"{self.summary()}\n{body}")
