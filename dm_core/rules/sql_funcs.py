"""The SQL functions expression filters may call, one builder each (``FUNCTIONS``).

A builder takes the sqlglot node and the compiler ``c`` (node -> closure) and returns a
closure over a row. MySQL semantics: NULL in, NULL out (except COALESCE/IFNULL, IF, CASE,
CONCAT_WS); SUBSTRING is 1-based with negative positions from the end; LENGTH counts bytes,
CHAR_LENGTH characters; ROUND rounds half away from zero on exact numbers.

    >>> _substring("Hello", -3, None, present=[True, True, False]), _substring("Hello", 0, None, [True, True, False])
    ('llo', '')
    >>> _trim("xxaxx", "x", None, "LEADING"), _round(Decimal("2.5"), None, [True, False]), _round(-5, -1, [True, True])
    ('axx', 3, -10)
"""

from __future__ import annotations

import json
import math
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, Callable

from sqlglot import exp

from dm_core.jsondoc import json_text
from dm_core.rules.sql_values import MASK64, Fn, UnsupportedExpression, compare, num, temporal, text, truth

Compile = Callable[[exp.Expression], Fn]


def binary_op(op):
    """Builder of a two-operand node: ``op(left value, right value)``."""
    def build(n, c):
        a, b = c(n.this), c(n.expression)
        return lambda row: op(a(row), b(row))
    return build


def unary_op(op):
    """Builder of a one-operand node: ``op(value)``."""
    def build(n, c):
        a = c(n.this)
        return lambda row: op(a(row))
    return build


def _args(n: exp.Expression) -> list[exp.Expression]:
    return ([n.this] if n.this is not None else []) + list(n.expressions)


def _func(fn, *names: str):
    """Builder for a function node whose arguments are ``this`` then the named args."""
    def build(n, c):
        fs = [c(n.this)] + [c(n.args[k]) if n.args.get(k) is not None else (lambda row: None) for k in names]
        present = [True] + [n.args.get(k) is not None for k in names]
        return lambda row: fn(*[f(row) for f in fs], present=present)
    return build


def _substring(s, start, length, present):
    if s is None or start is None or present[2] and length is None:
        return None
    s, pos = text(s), int(num(start))
    if pos == 0 or abs(pos) > len(s) and pos < 0:
        return ""
    begin = pos - 1 if pos > 0 else len(s) + pos
    if not present[2]:
        return s[begin:]
    n = int(num(length))
    return "" if n < 1 else s[begin:begin + n]


def _trim(s, chars, present, position="BOTH"):
    if s is None:
        return None
    s, rem = text(s), " " if chars is None else text(chars)
    if not rem:
        return s
    if position in ("BOTH", "LEADING"):
        while s.startswith(rem):
            s = s[len(rem):]
    if position in ("BOTH", "TRAILING"):
        while s.endswith(rem):
            s = s[:-len(rem)]
    return s


def _trim_builder(n, c):
    a = c(n.this)
    chars = c(n.expression) if n.expression is not None else (lambda row: None)
    pos = str(n.args.get("position") or "BOTH").upper()
    return lambda row: _trim(a(row), chars(row), None, pos)


def _locate(n, c):
    hay, sub = c(n.this), c(n.args["substr"])
    start = c(n.args["position"]) if n.args.get("position") is not None else (lambda row: 1)

    def f(row):
        h, s, p = text(hay(row)), text(sub(row)), start(row)
        if h is None or s is None or p is None:
            return None
        p = int(num(p))
        return 0 if p < 1 else h.find(s, p - 1) + 1
    return f


def _concat(n, c):
    fs = [c(e) for e in _args(n)]

    def f(row):
        vals = [text(x(row)) for x in fs]
        return None if any(v is None for v in vals) else "".join(vals)
    return f


def _concat_ws(n, c):
    sep, *fs = [c(e) for e in _args(n)]

    def f(row):
        s = text(sep(row))
        return None if s is None else s.join(v for v in (text(x(row)) for x in fs) if v is not None)
    return f


def _coalesce(n, c):
    fs = [c(e) for e in _args(n)]

    def f(row):
        for x in fs:
            v = x(row)
            if v is not None:
                return v
        return None
    return f


def _if(n, c):
    cond, yes = c(n.this), c(n.args["true"])
    no = c(n.args["false"]) if n.args.get("false") is not None else (lambda row: None)
    return lambda row: yes(row) if truth(cond(row)) is True else no(row)


def _case(n, c):
    subject = c(n.this) if n.this is not None else None
    arms = [(c(i.this), c(i.args["true"])) for i in n.args.get("ifs") or []]
    default = c(n.args["default"]) if n.args.get("default") is not None else (lambda row: None)

    def f(row):
        s = subject(row) if subject else None
        for cond, val in arms:
            hit = compare(s, cond(row)) == 0 if subject else truth(cond(row)) is True
            if hit:
                return val(row)
        return default(row)
    return f


def _round(v, d, present):
    v = num(v)
    if v is None or present[1] and d is None:
        return None
    places = int(num(d)) if present[1] else 0
    if isinstance(v, float):
        return round(v, places)
    q = Decimal(1).scaleb(-places)
    r = Decimal(v).quantize(q, rounding=ROUND_HALF_UP) if places >= 0 else \
        (Decimal(v).scaleb(places).quantize(Decimal(1), rounding=ROUND_HALF_UP)).scaleb(-places)
    return int(r) if isinstance(v, int) or places <= 0 else r


def _cast(n, c):
    a = c(n.this)
    to = n.args["to"].this.name if hasattr(n.args["to"].this, "name") else str(n.args["to"].this)
    to = to.upper()

    def as_int(v):
        v = num(v)
        if v is None:
            return None
        try:
            r = int(Decimal(v).quantize(Decimal(1), rounding=ROUND_HALF_UP))
        except InvalidOperation:
            return None
        return r & MASK64 if to.startswith("U") else r

    if "INT" in to:
        conv = as_int
    elif to in ("DECIMAL", "BIGDECIMAL"):
        conv = lambda v: None if num(v) is None else Decimal(num(v))  # noqa: E731
    elif to in ("DOUBLE", "FLOAT"):
        conv = lambda v: None if num(v) is None else float(num(v))  # noqa: E731
    elif to in ("DATETIME", "TIMESTAMP"):
        conv = temporal
    elif to == "DATE":
        conv = lambda v: None if temporal(v) is None else temporal(v).date()  # noqa: E731
    elif to in ("CHAR", "VARCHAR", "TEXT", "NCHAR", "BINARY", "VARBINARY"):
        conv = text
    else:
        raise UnsupportedExpression(f"unsupported CAST target {to}")
    return lambda row: conv(a(row))


def _n(fn):
    """A one-argument numeric function, NULL in NULL out."""
    return lambda v, present=None: None if num(v) is None else fn(num(v))


def _s(fn):
    """A string function of ``this`` plus extra arguments, NULL in NULL out."""
    def apply(*args, present=None):
        if any(a is None for a in args):
            return None
        return fn(text(args[0]), *args[1:])
    return apply


def _json_path(node) -> list:
    """A JSONPath node as steps: a key (str) or an array index (int)."""
    steps = []
    for part in node.expressions:
        if isinstance(part, exp.JSONPathRoot):
            continue
        if isinstance(part, exp.JSONPathKey) and isinstance(part.this, str):
            steps.append(part.this)
        elif isinstance(part, exp.JSONPathSubscript) and isinstance(part.this, int):
            steps.append(part.this)
        else:
            raise UnsupportedExpression(f"unsupported JSON path step {part.sql('mysql')!r} (keys and array "
                                        "indexes are supported)")
    return steps


def _json_extract(n, c):
    """``JSON_EXTRACT(doc, path)`` / ``doc->path`` (and ``->>``): the value at ``path``, NULL where
    there is none; scalars compare as MySQL compares a JSON scalar with a SQL value.

    >>> import sqlglot
    >>> from dm_core.rules.sql_eval import compile_expr
    >>> f = compile_expr(sqlglot.parse_one('j->"$.a[1]" = 2', read="mysql"), lambda k: k)
    >>> f({"j": '{"a": [1, 2]}'}), f({"j": '{"a": [1]}'}), f({"j": None})
    (True, None, None)
    """
    doc_of, steps = c(n.this), _json_path(n.expression)

    def get(row):
        v = doc_of(row)
        if v is None:
            return None
        try:  # MariaDB's JSON is text, as is a MySQL document that is a bare scalar (JsonText)
            doc = v if isinstance(v, (dict, list)) else json.loads(text(v))
        except ValueError:
            return None
        for step in steps:
            if isinstance(step, str) and isinstance(doc, dict) and step in doc:
                doc = doc[step]
            elif isinstance(step, int) and isinstance(doc, list) and -len(doc) <= step < len(doc):
                doc = doc[step]
            else:
                return None
        if isinstance(doc, bool):
            return int(doc)
        return json_text(doc) if isinstance(doc, (dict, list)) else doc  # a decoded one may hold Decimals
    return get


def _find_in_set(needle, haystack):
    """MySQL's FIND_IN_SET: the 1-based place of ``needle`` in a comma-separated list, 0 when
    absent (or when it holds a comma). A SET column's value comes as a set of members, whose
    order the binlog does not keep: they count in sorted order (still 0 exactly when absent).

    >>> _find_in_set("b", "a,b,c"), _find_in_set("c", {"d", "c"}), _find_in_set("x", "a,b"), _find_in_set("a", None)
    (2, 1, 0, None)
    """
    if needle is None or haystack is None:
        return None
    n = text(needle)
    items = sorted(haystack) if isinstance(haystack, (set, frozenset)) else text(haystack).split(",")
    if "," in n or items == [""]:
        return 0
    return items.index(n) + 1 if n in items else 0


# functions sqlglot leaves as Anonymous, by upper-case name: (builder of the argument values, arity)
_NAMED: dict[str, tuple[Callable, int]] = {
    "FIND_IN_SET": (_find_in_set, 2),
}


def _named(n, c):
    name = str(n.name).upper()
    got = _NAMED.get(name)
    if got is None:
        raise UnsupportedExpression(f"unsupported SQL {n.name!r} in {n.sql('mysql')!r}")
    fn, arity = got
    if len(n.expressions) != arity:
        raise UnsupportedExpression(f"{name} takes {arity} arguments: {n.sql('mysql')!r}")
    args = [c(e) for e in n.expressions]
    return lambda row: fn(*[a(row) for a in args])


FUNCTIONS: dict[type, Callable[[Any, Compile], Fn]] = {
    exp.Anonymous: _named,
    exp.JSONExtract: _json_extract,
    exp.JSONExtractScalar: _json_extract,
    exp.Length: lambda n, c: unary_op(lambda v: None if v is None else
                                    len(text(v).encode("utf-8")) if n.args.get("binary") else len(text(v)))(n, c),
    exp.Lower: unary_op(_s(str.lower)),
    exp.Upper: unary_op(_s(str.upper)),
    exp.Reverse: unary_op(_s(lambda s: s[::-1])),
    exp.Concat: _concat,
    exp.ConcatWs: _concat_ws,
    exp.Substring: _func(_substring, "start", "length"),
    exp.Trim: _trim_builder,
    exp.Left: _func(_s(lambda s, k: s[:max(0, int(num(k)))]), "expression"),
    exp.Right: _func(_s(lambda s, k: s[len(s) - int(num(k)):] if int(num(k)) > 0 else ""), "expression"),
    exp.StrPosition: _locate,
    exp.Replace: _func(_s(lambda s, old, new: s.replace(text(old), text(new)) if text(old) else s), "expression", "replacement"),
    exp.Coalesce: _coalesce,
    exp.If: _if,
    exp.Case: _case,
    exp.Abs: unary_op(_n(abs)),
    exp.Floor: unary_op(_n(math.floor)),
    exp.Ceil: unary_op(_n(math.ceil)),
    exp.Round: _func(_round, "decimals"),
    exp.Cast: _cast,
}
