"""MySQL boolean expressions (DM's expression filters) compiled into Python closures.

DM evaluates ``insert-value-expr`` & co. with TiDB's expression engine on each row. We parse
the text once with sqlglot's MySQL dialect and turn the tree into nested closures over a
row dict, with MySQL's rules where they matter for filtering:

* three-valued logic: NULL compares to nothing, ``NULL AND FALSE`` is FALSE, ``NULL OR TRUE``
  is TRUE, and a condition that ends up NULL is not true (the row is not skipped);
* numbers vs strings compare as numbers (``'12abc' = 12``), a number is true when non-zero;
* integer division by zero, ``MOD`` by zero: NULL; ``/`` gives an exact decimal.

String comparisons, LIKE and REGEXP are binary (case-sensitive), as in TiDB's default
``utf8mb4_bin`` collation. Each node type has one builder: operators here in ``_BUILDERS``,
functions in ``sql_funcs.FUNCTIONS``, value rules in ``sql_values``; an unsupported node
fails at compile time, never on a row.

    >>> f = compile_expr(parse_condition("c % 2 = 0 AND name LIKE 'a%'"), {"c": "c", "name": "name"}.__getitem__)
    >>> f({"c": 4, "name": "abc"}), f({"c": 3, "name": "abc"}), f({"c": None, "name": "abc"})
    (True, False, None)
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Callable

from sqlglot import exp

from dm_core.rules.sql_funcs import FUNCTIONS, Compile, binary_op, unary_op
from dm_core.rules.sql_values import (MASK64, Fn, HexLiteral, UnsupportedExpression, arith, bits, compare, div, intdiv,
                                      mod, num, text, truth, truthy)

__all__ = ["parse_condition", "columns_of", "compile_expr", "truthy", "UnsupportedExpression", "Fn"]


def parse_condition(sql: str) -> exp.Expression:
    """The sqlglot tree of one MySQL expression; ValueError when it is not exactly one."""
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        stmts = sqlglot.parse(f"SELECT 1 FROM t WHERE {sql}", read="mysql")
    except SqlglotError as e:
        raise ValueError(f"cannot parse {sql!r}: {str(e).splitlines()[0]}") from None
    st = stmts[0] if len(stmts) == 1 else None
    if not isinstance(st, exp.Select) or {k for k, v in st.args.items() if v} - {"expressions", "from", "from_", "where"}:
        raise ValueError(f"{sql!r} is not a single expression")
    return st.args["where"].this


def columns_of(node: exp.Expression) -> list[str]:
    """Column names the expression reads, in order of appearance."""
    out: list[str] = []
    for c in node.find_all(exp.Column):
        if c.name not in out:
            out.append(c.name)
    return out


# ---- compiler --------------------------------------------------------------------------


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






def _null_or(fn):
    return lambda *args: None if any(x is None for x in args) else fn(*args)


def _cmp_builder(test):
    return binary_op(lambda a, b: (lambda r: None if r is None else test(r))(compare(a, b)))


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


def _hex(digits: str) -> HexLiteral:
    return HexLiteral(bytes.fromhex(digits if len(digits) % 2 == 0 else "0" + digits))


def _const(v):
    return lambda n, c: (lambda row: v)


_BUILDERS: dict[type, Callable[[Any, Compile], Fn]] = {
    exp.Paren: lambda n, c: c(n.this),
    exp.Literal: _literal,
    exp.Boolean: lambda n, c: (lambda row, v=bool(n.this): v),
    exp.Null: _const(None),
    exp.HexString: lambda n, c: (lambda row, v=_hex(n.this): v),
    exp.BitString: lambda n, c: (lambda row, v=int(n.this, 2): v),
    exp.And: _and,
    exp.Or: _or,
    exp.Xor: _xor,
    exp.Not: unary_op(_not),
    exp.EQ: _cmp_builder(lambda r: r == 0),
    exp.NEQ: _cmp_builder(lambda r: r != 0),
    exp.GT: _cmp_builder(lambda r: r > 0),
    exp.GTE: _cmp_builder(lambda r: r >= 0),
    exp.LT: _cmp_builder(lambda r: r < 0),
    exp.LTE: _cmp_builder(lambda r: r <= 0),
    exp.NullSafeEQ: binary_op(lambda a, b: (a is None and b is None) or (a is not None and b is not None and compare(a, b) == 0)),
    exp.NullSafeNEQ: binary_op(lambda a, b: not ((a is None and b is None) or (a is not None and b is not None and compare(a, b) == 0))),
    exp.Is: _is,
    exp.In: _in,
    exp.Between: _between,
    exp.Like: _like,
    exp.Escape: _escape,
    exp.RegexpLike: _regexp,
    exp.Add: binary_op(arith(lambda a, b: a + b)),
    exp.Sub: binary_op(arith(lambda a, b: a - b)),
    exp.Mul: binary_op(arith(lambda a, b: a * b)),
    exp.Div: binary_op(arith(div)),
    exp.IntDiv: binary_op(arith(intdiv)),
    exp.Mod: binary_op(arith(mod)),
    exp.Neg: unary_op(lambda v: None if num(v) is None else -num(v)),
    exp.BitwiseAnd: binary_op(bits(lambda a, b: a & b)),
    exp.BitwiseOr: binary_op(bits(lambda a, b: a | b)),
    exp.BitwiseXor: binary_op(bits(lambda a, b: a ^ b)),
    exp.BitwiseLeftShift: binary_op(bits(lambda a, b: a << b if b < 64 else 0)),
    exp.BitwiseRightShift: binary_op(bits(lambda a, b: a >> b)),
    exp.BitwiseNot: unary_op(lambda v: None if num(v) is None else ~int(num(v)) & MASK64),
    **FUNCTIONS,
}
