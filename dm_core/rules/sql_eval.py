"""MySQL boolean expressions (DM's expression filters) compiled into Python closures.

DM evaluates ``insert-value-expr`` & co. with TiDB's expression engine on each row. We parse
the text once with sqlglot's MySQL dialect and turn the tree into nested closures over a
row dict, with MySQL's rules where they matter for filtering:

* three-valued logic: NULL compares to nothing, ``NULL AND FALSE`` is FALSE, ``NULL OR TRUE``
  is TRUE, and a condition that ends up NULL is not true (the row is not skipped);
* numbers vs strings compare as numbers (``'12abc' = 12``), a number is true when non-zero;
* integer division by zero, ``MOD`` by zero: NULL; ``/`` gives an exact decimal.

String comparisons, LIKE and REGEXP are binary (case-sensitive), as in TiDB's default
``utf8mb4_bin`` collation and in Spark, so the full load (``to_spark_sql``) drops the same
rows as the sync path. Each node type has one builder in ``_BUILDERS``; an unsupported node
fails at compile time, never on a row.

    >>> f = compile_expr(parse_condition("c % 2 = 0 AND name LIKE 'a%'"), {"c": "c", "name": "name"}.__getitem__)
    >>> f({"c": 4, "name": "abc"}), f({"c": 3, "name": "abc"}), f({"c": None, "name": "abc"})
    (True, False, None)
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, Callable, Mapping

from sqlglot import exp

Row = Mapping[str, Any]
Fn = Callable[[Row], Any]
MASK64 = (1 << 64) - 1


class UnsupportedExpression(ValueError):
    """The expression uses SQL this evaluator does not implement."""


def parse_condition(text: str) -> exp.Expression:
    """The sqlglot tree of one MySQL expression; ValueError when it is not exactly one."""
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        stmts = sqlglot.parse(f"SELECT 1 FROM t WHERE {text}", read="mysql")
    except SqlglotError as e:
        raise ValueError(f"cannot parse {text!r}: {str(e).splitlines()[0]}") from None
    st = stmts[0] if len(stmts) == 1 else None
    if not isinstance(st, exp.Select) or {k for k, v in st.args.items() if v} - {"expressions", "from", "from_", "where"}:
        raise ValueError(f"{text!r} is not a single expression")
    return st.args["where"].this


def columns_of(node: exp.Expression) -> list[str]:
    """Column names the expression reads, in order of appearance."""
    out: list[str] = []
    for c in node.find_all(exp.Column):
        if c.name not in out:
            out.append(c.name)
    return out


# ---- MySQL value semantics ---------------------------------------------------------------
_NUM_PREFIX = re.compile(r"\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)")


def text(v: Any) -> str | None:
    """A value as MySQL would print it in a string context."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        s = int(v.total_seconds())
        return f"{'-' if s < 0 else ''}{abs(s) // 3600:02d}:{abs(s) % 3600 // 60:02d}:{abs(s) % 60:02d}"
    return str(v)


def num(v: Any) -> Any:
    """A value in a numeric context: strings by their numeric prefix ('12abc' -> 12, 'x' -> 0)."""
    if v is None or isinstance(v, (int, float, Decimal)):
        return v
    if isinstance(v, (bytes, bytearray, str)):
        m = _NUM_PREFIX.match(text(v))
        if not m:
            return 0
        t = m.group(1)
        return float(t) if any(ch in t for ch in ".eE") else int(t)
    if isinstance(v, dt.datetime):
        return int(v.strftime("%Y%m%d%H%M%S"))
    if isinstance(v, dt.date):
        return int(v.strftime("%Y%m%d"))
    if isinstance(v, dt.timedelta):
        return int(v.total_seconds())
    return v


def truth(v: Any) -> bool | None:
    """MySQL truth value: None for NULL, else non-zero."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, (dt.date, dt.time)):
        return True
    return num(v) != 0


def truthy(v: Any) -> bool:
    """Whether a condition holds: NULL does not."""
    return truth(v) is True


def _temporal(v: Any) -> dt.datetime | None:
    if isinstance(v, dt.datetime):
        return v
    if isinstance(v, dt.date):
        return dt.datetime(v.year, v.month, v.day)
    if isinstance(v, str):
        try:
            return dt.datetime.fromisoformat(v.strip())
        except ValueError:
            return None
    return None


def compare(a: Any, b: Any) -> int | None:
    """-1, 0, 1 or None (NULL), with MySQL's type coercion."""
    if a is None or b is None:
        return None
    if isinstance(a, (bytes, bytearray)):
        a = text(a)
    if isinstance(b, (bytes, bytearray)):
        b = text(b)
    if isinstance(a, str) and isinstance(b, str):
        return (a > b) - (a < b)
    if isinstance(a, (dt.date, dt.time)) or isinstance(b, (dt.date, dt.time)):
        x, y = _temporal(a), _temporal(b)
        if x is None or y is None:
            x, y = text(a), text(b)
        return (x > y) - (x < y)
    x, y = num(a), num(b)
    return (x > y) - (x < y)


def _arith(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def apply(a, b):
        a, b = num(a), num(b)
        if a is None or b is None:
            return None
        if isinstance(a, float) or isinstance(b, float):
            return op(float(a), float(b))
        if isinstance(a, Decimal) or isinstance(b, Decimal):
            return op(Decimal(a), Decimal(b))
        return op(int(a), int(b))
    return apply


def _div(a, b):
    if b == 0:
        return None
    return a / b if isinstance(a, float) else Decimal(a) / Decimal(b)


def _intdiv(a, b):
    return None if b == 0 else int(a / b if isinstance(a, float) else Decimal(a) / Decimal(b))


def _mod(a, b):
    if b == 0:
        return None
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _bits(op):
    def apply(a, b):
        a, b = num(a), num(b)
        return None if a is None or b is None else op(int(a) & MASK64, int(b) & MASK64) & MASK64
    return apply


# ---- compiler --------------------------------------------------------------------------
Compile = Callable[[exp.Expression], Fn]


def compile_expr(node: exp.Expression, resolve: Callable[[str], str]) -> Fn:
    """A closure ``row -> value`` for ``node``; ``resolve`` maps a column name to its row key
    (raising KeyError for an unknown column)."""

    def c(n: exp.Expression) -> Fn:
        if isinstance(n, exp.Column):
            if n.table:
                raise UnsupportedExpression(f"qualified column {n.sql('mysql')}: write the bare column name")
            key = resolve(n.name)
            return lambda row: row.get(key)
        build = _BUILDERS.get(type(n))
        if build is None:
            name = n.name if isinstance(n, exp.Anonymous) else n.key.upper()
            raise UnsupportedExpression(f"unsupported SQL {name!r} in {n.sql('mysql')!r}")
        fn = build(n, c)
        if n.args.get("negate"):
            inner = fn
            fn = lambda row: _not(inner(row))  # noqa: E731
        return fn

    return c(node)


def _not(v):
    t = truth(v)
    return None if t is None else not t


def _binary(op):
    def build(n, c):
        a, b = c(n.this), c(n.expression)
        return lambda row: op(a(row), b(row))
    return build


def _unary(op):
    def build(n, c):
        a = c(n.this)
        return lambda row: op(a(row))
    return build


def _null_or(fn):
    return lambda *args: None if any(x is None for x in args) else fn(*args)


def _cmp_builder(test):
    return _binary(lambda a, b: (lambda r: None if r is None else test(r))(compare(a, b)))


def _and(n, c):
    a, b = c(n.this), c(n.expression)

    def f(row):
        x = truth(a(row))
        if x is False:
            return False
        y = truth(b(row))
        return False if y is False else None if x is None or y is None else True
    return f


def _or(n, c):
    a, b = c(n.this), c(n.expression)

    def f(row):
        x = truth(a(row))
        if x is True:
            return True
        y = truth(b(row))
        return True if y is True else None if x is None or y is None else False
    return f


def _xor(n, c):
    a, b = c(n.this), c(n.expression)
    return lambda row: _null_or(lambda x, y: x != y)(truth(a(row)), truth(b(row)))


def _is(n, c):
    a = c(n.this)
    target = n.expression
    if isinstance(target, exp.Null):
        return lambda row: a(row) is None
    if isinstance(target, exp.Boolean):
        want = bool(target.this)
        return lambda row: truth(a(row)) is want
    raise UnsupportedExpression(f"unsupported IS {target.sql('mysql')}")


def _in(n, c):
    if n.args.get("query") or n.args.get("unnest") or n.args.get("field"):
        raise UnsupportedExpression(f"IN needs a literal list: {n.sql('mysql')!r}")
    a, items = c(n.this), [c(e) for e in n.expressions]

    def f(row):
        v = a(row)
        if v is None:
            return None
        saw_null = False
        for it in items:
            r = compare(v, it(row))
            if r == 0:
                return True
            saw_null |= r is None
        return None if saw_null else False
    return f


def _between(n, c):
    a, lo, hi = c(n.this), c(n.args["low"]), c(n.args["high"])

    def f(row):
        v = a(row)
        x, y = compare(v, lo(row)), compare(v, hi(row))
        if x is not None and x < 0 or y is not None and y > 0:
            return False
        return None if x is None or y is None else True
    return f


def _like_regex(pattern: str, escape: str) -> re.Pattern:
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _like(n, c, escape="\\"):
    a, p = c(n.this), c(n.expression)
    cache: dict[str, re.Pattern] = {}

    def f(row):
        v, pat = text(a(row)), text(p(row))
        if v is None or pat is None:
            return None
        rx = cache.get(pat) or cache.setdefault(pat, _like_regex(pat, escape))
        return rx.match(v) is not None
    return f


def _escape(n, c):
    if not isinstance(n.this, exp.Like) or not isinstance(n.expression, exp.Literal):
        raise UnsupportedExpression(f"unsupported ESCAPE in {n.sql('mysql')!r}")
    fn = _like(n.this, c, n.expression.this or "\\")
    return (lambda row: _not(fn(row))) if n.this.args.get("negate") else fn


def _regexp(n, c):
    a, p = c(n.this), c(n.expression)
    flag = n.args.get("flag")
    flags = re.IGNORECASE if isinstance(flag, exp.Literal) and "i" in str(flag.this) else 0
    cache: dict[str, re.Pattern] = {}

    def f(row):
        v, pat = text(a(row)), text(p(row))
        if v is None or pat is None:
            return None
        if pat not in cache:
            from dm_core.rules.patterns import go_regex

            cache[pat] = re.compile(go_regex(pat), flags)
        return cache[pat].search(v) is not None
    return f


def _literal(n, c):
    if n.is_string:
        v = n.this
    else:
        t = n.this
        v = float(t) if "e" in t.lower() else Decimal(t) if "." in t else int(t)
    return lambda row: v


def _const(v):
    return lambda n, c: (lambda row: v)


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
        conv = _temporal
    elif to == "DATE":
        conv = lambda v: None if _temporal(v) is None else _temporal(v).date()  # noqa: E731
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


_BUILDERS: dict[type, Callable[[Any, Compile], Fn]] = {
    exp.Paren: lambda n, c: c(n.this),
    exp.Literal: _literal,
    exp.Boolean: lambda n, c: (lambda row, v=bool(n.this): v),
    exp.Null: _const(None),
    exp.HexString: lambda n, c: (lambda row, v=int(n.this, 16): v),
    exp.BitString: lambda n, c: (lambda row, v=int(n.this, 2): v),
    exp.And: _and,
    exp.Or: _or,
    exp.Xor: _xor,
    exp.Not: _unary(_not),
    exp.EQ: _cmp_builder(lambda r: r == 0),
    exp.NEQ: _cmp_builder(lambda r: r != 0),
    exp.GT: _cmp_builder(lambda r: r > 0),
    exp.GTE: _cmp_builder(lambda r: r >= 0),
    exp.LT: _cmp_builder(lambda r: r < 0),
    exp.LTE: _cmp_builder(lambda r: r <= 0),
    exp.NullSafeEQ: _binary(lambda a, b: (a is None and b is None) or (a is not None and b is not None and compare(a, b) == 0)),
    exp.NullSafeNEQ: _binary(lambda a, b: not ((a is None and b is None) or (a is not None and b is not None and compare(a, b) == 0))),
    exp.Is: _is,
    exp.In: _in,
    exp.Between: _between,
    exp.Like: _like,
    exp.Escape: _escape,
    exp.RegexpLike: _regexp,
    exp.Add: _binary(_arith(lambda a, b: a + b)),
    exp.Sub: _binary(_arith(lambda a, b: a - b)),
    exp.Mul: _binary(_arith(lambda a, b: a * b)),
    exp.Div: _binary(_arith(_div)),
    exp.IntDiv: _binary(_arith(_intdiv)),
    exp.Mod: _binary(_arith(_mod)),
    exp.Neg: _unary(lambda v: None if num(v) is None else -num(v)),
    exp.BitwiseAnd: _binary(_bits(lambda a, b: a & b)),
    exp.BitwiseOr: _binary(_bits(lambda a, b: a | b)),
    exp.BitwiseXor: _binary(_bits(lambda a, b: a ^ b)),
    exp.BitwiseLeftShift: _binary(_bits(lambda a, b: a << b if b < 64 else 0)),
    exp.BitwiseRightShift: _binary(_bits(lambda a, b: a >> b)),
    exp.BitwiseNot: _unary(lambda v: None if num(v) is None else ~int(num(v)) & MASK64),
    exp.Length: lambda n, c: _unary(lambda v: None if v is None else
                                    len(text(v).encode("utf-8")) if n.args.get("binary") else len(text(v)))(n, c),
    exp.Lower: _unary(_s(str.lower)),
    exp.Upper: _unary(_s(str.upper)),
    exp.Reverse: _unary(_s(lambda s: s[::-1])),
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
    exp.Abs: _unary(_n(abs)),
    exp.Floor: _unary(_n(math.floor)),
    exp.Ceil: _unary(_n(math.ceil)),
    exp.Round: _func(_round, "decimals"),
    exp.Cast: _cast,
}
