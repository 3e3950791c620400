"""Collect every problem of a config file, then raise one error that lists them all.

A user fixing a task file should see all of its mistakes at once, each with the dotted key
path that is wrong and what to write instead (sqlglot's error-level policy: collect, then
raise once). The password is never part of a problem: messages name keys, not values.

    >>> p = Problems("task.yaml")
    >>> p.add("mysql-instances[1].route-rules[0]", "no route named 'r9'", "define routes.r9, or use one of: r1")
    >>> print(str(TaskConfigError(p.items)).splitlines()[1])
    task.yaml: mysql-instances[1].route-rules[0]: no route named 'r9' (fix: define routes.r9, or use one of: r1)
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from dm_core.errors import ErrorCode, Terminal


@dataclass(frozen=True)
class ConfigProblem:
    file: str
    key: str            # dotted key path, e.g. "mysql-instances[1].route-rules[0]"
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.file}: {self.key}: {self.message} (fix: {self.fix})"


class ConfigError(Terminal):
    """A config file with problems; ``problems`` lists every one of them."""

    code = ErrorCode.CONFIG_INVALID
    kind = "config"

    def __init__(self, problems: list[ConfigProblem]):
        self.problems = list(problems)
        n = len(self.problems)
        where = self.problems[0].file if self.problems else "?"
        head = f"{self.kind} file {where} has {n} problem{'' if n == 1 else 's'}:"
        super().__init__("\n".join([head] + [str(p) for p in self.problems]))


class TaskConfigError(ConfigError):
    code = ErrorCode.CONFIG_INVALID
    kind = "task"


class SourceConfigError(ConfigError):
    code = ErrorCode.SOURCE_INVALID
    kind = "source"


class Problems:
    """The collector one parse shares; ``warnings`` are kept on the result, not raised."""

    def __init__(self, file: str):
        self.file = file
        self.items: list[ConfigProblem] = []
        self.warnings: list[ConfigProblem] = []

    def add(self, key: str, message: str, fix: str) -> None:
        self.items.append(ConfigProblem(self.file, key, message, fix))

    def warn(self, key: str, message: str, fix: str) -> None:
        self.warnings.append(ConfigProblem(self.file, key, message, fix))

    def raise_if_any(self, error: type[ConfigError]) -> None:
        if self.items:
            raise error(self.items)

    def __len__(self) -> int:
        return len(self.items)


def closest(word: str, choices, what: str = "one of") -> str:
    """A fix text suggesting the nearest valid spelling (difflib), else listing the choices."""
    choices = sorted(str(c) for c in choices)
    near = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if near:
        return f"did you mean `{near[0]}`?"
    if not choices:
        return "remove it"
    return f"use {what}: {', '.join(choices)}"


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
