"""The value of a JSON column as the binlog reader hands it over, and its exact JSON text.

A MySQL document that is an object or array is a ``dict`` / ``list`` (binlog/decode.py says
what is inside). A document that is a bare scalar (``"abc"``, ``1``, ``true``, ``null``) is a
``JsonText``: its JSON text, like MariaDB's JSON (LONGTEXT) always is. Typed, and not the plain
Python scalar, because the applier knows a value by its Python type, not by its column's: a
plain ``None`` would write SQL NULL where the document is JSON ``null``, and a plain ``"123"`` or
``True`` would reach the downstream JSON column as the number 123 / 1.

>>> json_text({"a": [1, 2.5, Decimal("1.50"), "é", None, True]})
'{"a": [1, 2.5, 1.50, "é", null, true]}'
"""

from __future__ import annotations

import json
from decimal import Decimal
from functools import partial


class JsonText(str):
    __slots__ = ()


# MySQL's own spacing; floats as repr (the shortest text that reads back the same double)
_dumps = partial(json.dumps, ensure_ascii=False, separators=(", ", ": "), allow_nan=False)


def json_text(v) -> str:
    """``v`` (dict / list / scalar) as JSON text, exact: ints with all their digits, Decimals
    with their scale, non-ASCII text as is, keys in their order. NaN/inf and types JSON has
    no form for are refused (ValueError / TypeError), never written changed."""
    try:
        return _dumps(v)  # the C encoder: fast, exact for everything but Decimal
    except TypeError:
        return _walk(v)


def _walk(v) -> str:
    if isinstance(v, Decimal):
        if not v.is_finite():
            raise ValueError(f"{v} is not a JSON number")
        return format(v, "f")  # never exponent form, which a JSON reader takes for a double
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_dumps(k)}: {_walk(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(map(_walk, v)) + "]"
    return _dumps(v)
