# cython: language_level=3, boundscheck=False, wraparound=False
"""Statement text in C: the compiled twin of ``literal.Renderer._fill``.

Why: filling the DML statements' placeholders is the appliers' largest cost in the process whose
GIL bounds the incremental phase (docs/benchmarks.md, "incremental"): a Python call per value,
then ``bytes %`` parsing the template again for every row.

Protocol: ``literal.Renderer`` splits a template once at its ``%s`` placeholders (``%%`` read as
``%``) and hands the pieces and the values here; ``Filler(quote, by_type, literal)`` holds the
connection's quoting (mysqlclient's ``string_literal``, the C ``mysql_real_escape_string``) and
the Renderer's own conversions. Integers, booleans, ``None``, floats, ``Decimal``, naive
``datetime``, ``date``, ``timedelta`` (TIME) and ``bytes`` are written here; strings and SET
members are quoted by the driver as in Python; every other type (and subclasses of these) goes
through the Renderer's table, so the bytes are the Python path's, value for value
(``tests/unit/test_sync_sqltext.py``).
"""

from cpython.datetime cimport (import_datetime, PyDateTime_CheckExact, PyDate_CheckExact,
                               PyDateTime_GET_YEAR, PyDateTime_GET_MONTH, PyDateTime_GET_DAY,
                               PyDateTime_DATE_GET_HOUR, PyDateTime_DATE_GET_MINUTE,
                               PyDateTime_DATE_GET_SECOND, PyDateTime_DATE_GET_MICROSECOND,
                               datetime_tzinfo, PyDelta_CheckExact, PyDateTime_DELTA_GET_DAYS,
                               PyDateTime_DELTA_GET_SECONDS, PyDateTime_DELTA_GET_MICROSECONDS)
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject_Format
from cpython.unicode cimport PyUnicode_AsASCIIString
from libc.stdio cimport snprintf

import decimal

import_datetime()

cdef object _Decimal = decimal.Decimal
cdef str _F = "f"


cdef class Filler:
    """Placeholders of one connection's statements filled with SQL literals."""

    cdef object quote, literal
    cdef dict by_type

    def __cinit__(self, quote, dict by_type, literal):
        self.quote, self.by_type, self.literal = quote, by_type, literal

    cdef bytes value(self, object v):
        cdef type t = type(v)
        cdef char[64] buf
        cdef int n, overflow
        cdef long long x
        cdef object f, r
        if t is int:
            x = PyLong_AsLongLongAndOverflow(v, &overflow)
            if overflow:
                return b"%d" % v
            n = snprintf(buf, 64, "%lld", x)
            return PyBytes_FromStringAndSize(buf, n)
        if t is str:
            return self.quote(v)
        if v is None:
            return b"NULL"
        if t is _Decimal:
            return PyUnicode_AsASCIIString(PyObject_Format(v, _F))
        if PyDateTime_CheckExact(v) and datetime_tzinfo(v) is None:
            if PyDateTime_DATE_GET_MICROSECOND(v):
                n = snprintf(buf, 64, "'%04d-%02d-%02d %02d:%02d:%02d.%06d'", PyDateTime_GET_YEAR(v),
                             PyDateTime_GET_MONTH(v), PyDateTime_GET_DAY(v), PyDateTime_DATE_GET_HOUR(v),
                             PyDateTime_DATE_GET_MINUTE(v), PyDateTime_DATE_GET_SECOND(v),
                             PyDateTime_DATE_GET_MICROSECOND(v))
            else:
                n = snprintf(buf, 64, "'%04d-%02d-%02d %02d:%02d:%02d'", PyDateTime_GET_YEAR(v),
                             PyDateTime_GET_MONTH(v), PyDateTime_GET_DAY(v), PyDateTime_DATE_GET_HOUR(v),
                             PyDateTime_DATE_GET_MINUTE(v), PyDateTime_DATE_GET_SECOND(v))
            return PyBytes_FromStringAndSize(buf, n)
        if PyDate_CheckExact(v):
            n = snprintf(buf, 64, "'%04d-%02d-%02d'", PyDateTime_GET_YEAR(v), PyDateTime_GET_MONTH(v),
                         PyDateTime_GET_DAY(v))
            return PyBytes_FromStringAndSize(buf, n)
        if t is float:
            r = repr(v)
            if r[-1] in "nf":   # nan, inf, -inf
                raise ValueError(f"{r} cannot be stored in MySQL")
            return PyUnicode_AsASCIIString(r)
        if t is bytes:
            return b"_binary" + self.quote(v)
        if t is bool:
            return b"1" if v else b"0"
        if PyDelta_CheckExact(v) and -1000000 < PyDateTime_DELTA_GET_DAYS(v) < 1000000:
            return _span(v)
        if t is set or t is frozenset:
            return self.quote(",".join(sorted(v)))
        f = self.by_type.get(t)
        return f(v) if f is not None else self.literal(v)

    cpdef bytes fill(self, tuple parts, params):
        """``parts[0] + literal(params[0]) + parts[1] + ... + parts[-1]``."""
        cdef Py_ssize_t i, n = len(params)
        cdef list out
        if len(parts) != n + 1:
            raise TypeError("not enough arguments for format string" if len(parts) > n + 1
                            else "not all arguments converted during bytes formatting")
        out = [parts[0]]
        for i in range(n):
            out.append(self.value(params[i]))
            out.append(parts[i + 1])
        return b"".join(out)

    def fill_rows(self, tuple parts, list rows):
        """``fill`` for each row of a multi-row statement."""
        return [self.fill(parts, p) for p in rows]


cdef bytes _span(object v):
    """A TIME literal, '[-]H:MM:SS[.ffffff]', as ``literal.Renderer``'s span writes it (days small
    enough that the microseconds fit a long long)."""
    cdef char[64] buf
    cdef int n
    cdef long long us = (<long long> PyDateTime_DELTA_GET_DAYS(v) * 86400 + PyDateTime_DELTA_GET_SECONDS(v)) * 1000000 \
        + PyDateTime_DELTA_GET_MICROSECONDS(v)
    cdef const char* sign = "-" if us < 0 else ""
    if us < 0:
        us = -us
    cdef long long secs = us // 1000000, frac = us % 1000000
    if frac:
        n = snprintf(buf, 64, "'%s%lld:%02lld:%02lld.%06lld'", sign, secs // 3600, secs // 60 % 60, secs % 60, frac)
    else:
        n = snprintf(buf, 64, "'%s%lld:%02lld:%02lld'", sign, secs // 3600, secs // 60 % 60, secs % 60)
    return PyBytes_FromStringAndSize(buf, n)
