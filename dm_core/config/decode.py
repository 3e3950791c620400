"""Strict YAML -> dataclass decoding, DM style (``yaml.UnmarshalStrict``).

Every record (rule, unit config, instance, task) is a dataclass whose fields carry their YAML
key (``name_like_this`` is ``name-like-this`` unless ``metadata={"yaml": ...}`` says
otherwise; ``{"yaml": None}`` is not read from YAML) and whose type annotation is the type
the key must have. One decoder walks them all, so unknown keys, duplicate keys, wrong types
and missing keys are reported the same way everywhere, with the dotted key path. A field
may add ``metadata={"convert": fn}`` for a value that needs parsing (durations, sizes).

As with go-yaml, a YAML null keeps the default and a number is accepted where a string is
expected (``password: 123456``); a string is never accepted for a number.

    >>> p = Problems("t.yaml")
    >>> go_duration("1m30s"), go_duration("0")
    (90.0, 0.0)
    >>> load_yaml("a: 1\\na: 2\\n", p), [str(x) for x in p.items]
    (None, ["t.yaml: line 2: duplicate key 'a' (fix: keep one of the two; DM rejects duplicate keys)"])
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
import types
import typing
from typing import Any, Union

import yaml

from dm_core.config.problems import Problems, closest, join

# ---- YAML -------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys in a mapping, as go-yaml's strict mode does."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, typing.Hashable):
                continue
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def load_yaml(text: str, problems: Problems) -> Any:
    """The parsed document, or None after recording the syntax error with its line."""
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}" if mark else "yaml"
        fix = ("keep one of the two; DM rejects duplicate keys" if "duplicate key" in str(e.problem)
               else "fix the YAML syntax there (indentation, a ':' after each key, quotes around values with ': ' or '#')")
        problems.add(where, str(e.problem or e.context), fix)
    except yaml.YAMLError as e:
        problems.add("yaml", f"not valid YAML: {e}", "fix the YAML syntax")
    return None


# ---- scalar helpers ---------------------------------------------------------------------
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def go_duration(value: Any) -> float:
    """Seconds in a Go duration string ("60s", "1m30s", "1.5h", "0"); ValueError otherwise.

    A YAML integer reaches DM's string field as its text: ``safe-mode-duration: 0`` (DM's
    shardddl1_1 task files) is "0", zero seconds; any other number lacks a unit there.

    >>> go_duration(0), go_duration("1m30s")
    (0.0, 90.0)
    """
    if value == 0 and isinstance(value, int) and not isinstance(value, bool):
        return 0.0
    if not isinstance(value, str) or isinstance(value, bool):
        raise ValueError(f"expected a duration string such as \"60s\" or \"1m30s\", got {_kind(value)}")
    s = value.strip()
    sign = -1.0 if s.startswith("-") else 1.0
    s = s.lstrip("+-")
    if s == "0":
        return 0.0
    total, pos = 0.0, 0
    while pos < len(s):
        m = _GO_PART.match(s, pos)
        if not m:
            unit = "missing unit in" if re.fullmatch(r"[\d.]+", s) else "invalid"
            raise ValueError(f"{unit} duration {value!r}; write it like \"60s\", \"1m30s\" or \"2h\"")
        total += float(m.group(1)) * _GO_UNITS[m.group(2)]
        pos = m.end()
    if not s:
        raise ValueError("empty duration")
    return sign * total


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: str, key: str, problems: Problems) -> str:
    """``${NAME}`` replaced by the environment variable; a missing one is a problem on ``key``."""

    def sub(m: re.Match) -> str:
        got = os.environ.get(m.group(1))
        if got is None:
            problems.add(key, f"environment variable {m.group(1)} is not set",
                         f"export {m.group(1)} before loading the file, or write the value in the file")
            return ""
        return got

    return _ENV.sub(sub, value)


def _kind(v: Any) -> str:
    if v is None:
        return "nothing (null)"
    if isinstance(v, bool):
        return f"a boolean ({v})"
    if isinstance(v, (int, float)):
        return f"a number ({v})"
    if isinstance(v, str):
        return f"a string ({v!r})" if len(v) < 40 else "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "a mapping"
    return type(v).__name__


# ---- dataclasses ------------------------------------------------------------------------
def yaml_keys(cls) -> dict[str, dataclasses.Field]:
    """YAML key -> field of a record class."""
    out = {}
    for f in dataclasses.fields(cls):
        key = f.metadata.get("yaml", f.name.replace("_", "-"))
        if key is not None:
            out[key] = f
    return out


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def decode(cls, data: Any, path: str, problems: Problems, *, also: tuple[str, ...] = ()):
    """An instance of ``cls`` from a YAML mapping, or None when it cannot be built.

    ``also``: keys the caller handles itself (accepted, not decoded). A key with a wrong value
    is reported and left at its default, so later checks still run on the rest."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        problems.add(path or "(top level)", f"expected a mapping of keys, got {_kind(data)}",
                     "write `key: value` lines indented under it")
        return None
    fields = yaml_keys(cls)
    hints = typing.get_type_hints(cls)
    kwargs, bad = {}, set()
    for k, v in data.items():
        key = join(path, str(k))
        f = fields.get(k) if isinstance(k, str) else None
        if f is None:
            if k not in also:
                problems.add(key, "unknown key", closest(str(k), list(fields) + list(also), "one of the keys allowed here"))
            continue
        if v is None:
            continue
        conv = f.metadata.get("convert")
        if conv is not None:
            try:
                kwargs[f.name] = conv(v)
            except ValueError as e:
                problems.add(key, str(e), f.metadata.get("fix", "see DM's task file reference"))
                bad.add(f.name)
            continue
        ok, val = convert(hints[f.name], v, key, problems)
        if ok:
            kwargs[f.name] = val
        else:
            bad.add(f.name)
    missing = [k for k, f in fields.items() if _required(f) and f.name not in kwargs and f.name not in bad]
    for k in missing:
        problems.add(join(path, k), "missing", f"add `{k}:`")
    if missing or any(_required(f) for f in dataclasses.fields(cls) if f.name in bad):
        return None
    return cls(**kwargs)


def convert(tp: Any, v: Any, path: str, problems: Problems) -> tuple[bool, Any]:
    """(ok, value): ``v`` checked against the annotation ``tp``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if v is None:
            return True, None
        inner = [a for a in args if a is not type(None)]
        return convert(inner[0], v, path, problems)
    if tp is Any or tp is object:
        return True, v

    def fail(what: str) -> tuple[bool, Any]:
        problems.add(path, f"expected {what}, got {_kind(v)}", f"write {what} here")
        return False, None

    if tp is str:
        if isinstance(v, str):
            return True, v
        if isinstance(v, (int, float, dt.date)) and not isinstance(v, bool):
            return True, v.isoformat() if isinstance(v, dt.date) else str(v)
        return fail("a string")
    if tp is bool:
        return (True, v) if isinstance(v, bool) else fail("true or false")
    if tp is int:
        return (True, v) if isinstance(v, int) and not isinstance(v, bool) else fail("an integer")
    if tp is float:
        return (True, float(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else fail("a number")
    if origin is list:
        if v is None:
            return True, []
        if not isinstance(v, list):
            return fail("a list (`[a, b]` or `- a` lines)")
        out, ok = [], True
        for i, item in enumerate(v):
            good, val = convert(args[0], item, f"{path}[{i}]", problems)
            ok &= good
            if good:
                out.append(val)
        return ok, out
    if origin is dict or tp is dict:
        if v is None:
            return True, {}
        if not isinstance(v, dict):
            return fail("a mapping")
        if not args:
            return True, v
        out, ok = {}, True
        for k, item in v.items():
            if args[1] is str and isinstance(item, bool):
                item = "true" if item else "false"     # session: {foreign_key_checks: true}
            good, val = convert(args[1], item, join(path, str(k)), problems)
            ok &= good
            if good:
                out[str(k)] = val
        return ok, out
    if dataclasses.is_dataclass(tp):
        got = decode(tp, v, path, problems)
        return got is not None, got
    return True, v
