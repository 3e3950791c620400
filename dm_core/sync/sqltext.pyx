# cython: language_level=3, boundscheck=False, wraparound=False
"""Statement text in C: the compiled twin of ``literal.Renderer._fill``.

Why: filling the DML statements' placeholders is the appliers' largest cost in the process whose
GIL bounds the incremental phase (docs/benchmarks.md, "incremental"): a Python call per value,
then ``bytes %`` parsing the template again for every row.

Protocol: ``literal.Renderer`` splits a template once at its ``%s`` placeholders (``%%`` read as
``%``) and hands the pieces and the values here; ``Filler(quote, by_type, literal, own_escape)`` holds the
connection's quoting (mysqlclient's ``string_literal``, the C ``mysql_real_escape_string``) and
the Renderer's own conversions. Integers, booleans, ``None``, floats, ``Decimal``, naive
``datetime``, ``date``, ``timedelta`` (TIME), ``bytes``, strings and SET members are written
here; every other type (and subclasses of these) goes through the Renderer's table, so the bytes
are the Python path's, value for value (``tests/unit/test_sync_sqltext.py``). A row is written
into one buffer the Filler keeps (a Filler per connection, so per worker thread), the common
values straight into it, and leaves as one bytes object.

Strings and byte strings are escaped here too when ``own_escape`` says the connection's
character set is one where that is exact (UTF-8: no byte of a multi-byte character is below
0x80, so escaping byte by byte is what ``mysql_real_escape_string`` does), and only while the
driver escapes with backslashes: each ``fill`` / ``fill_rows`` asks it first (``quote("\\")``),
since a session with ``NO_BACKSLASH_ESCAPES`` quotes by doubling instead. Otherwise, and for a
string UTF-8 cannot encode, the driver quotes as in Python. Why: the driver's escape is a
Python call, a character-set check per byte and a resized copy per value, a twentieth of the
sync's CPU on ``make bench``.
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
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object, Py_ssize_t*) except NULL
    char* PyBytes_AS_STRING(object)

import decimal

import_datetime()

cdef object _Decimal = decimal.Decimal
cdef str _F = "f"
cdef Py_ssize_t KEEP_BYTES = 1 << 20   # the most buffer a Filler keeps between rows
cdef bytes _BACKSLASHED = b"'\\\\'"   # the driver's quote of one backslash, while it escapes with backslashes

# the character after the backslash for each byte mysql_real_escape_string escapes, else 0
cdef unsigned char[256] _ESC
for _i in range(256):
    _ESC[_i] = 0
_ESC[0], _ESC[10], _ESC[13], _ESC[26] = ord("0"), ord("n"), ord("r"), ord("Z")
_ESC[34], _ESC[39], _ESC[92] = ord('"'), ord("'"), ord("\\")


cdef class Filler:
    """Placeholders of one connection's statements filled with SQL literals."""

    cdef object quote, literal
    cdef dict by_type
    cdef bint own_escape   # the connection's character set allows escaping here (module docstring)
    cdef bint escape       # own_escape, and the driver escapes with backslashes right now
    cdef char* buf         # the statement (or row) being written; reused, one Filler per connection
    cdef Py_ssize_t cap, size

    def __cinit__(self, quote, dict by_type, literal, bint own_escape=False):
        self.quote, self.by_type, self.literal = quote, by_type, literal
        self.own_escape = own_escape
        self.escape = False
        self.buf, self.cap, self.size = NULL, 0, 0

    def __dealloc__(self):
        free(self.buf)

    cdef int _room(self, Py_ssize_t k) except -1:
        cdef Py_ssize_t cap
        cdef char* grown
        if self.size + k > self.cap:
            cap = max(2 * self.cap, self.size + k, 4096)
            grown = <char*> realloc(self.buf, cap)
            if grown == NULL:
                raise MemoryError()
            self.buf, self.cap = grown, cap
        return 0

    cdef int _put(self, const char* s, Py_ssize_t n) except -1:
        self._room(n)
        memcpy(self.buf + self.size, s, n)
        self.size += n
        return 0

    cdef int _put_escaped(self, const unsigned char* s, Py_ssize_t n) except -1:
        """' + s with every special byte backslash-escaped + '."""
        cdef Py_ssize_t i, j
        cdef unsigned char e
        self._room(2 * n + 2)
        j = self.size
        self.buf[j] = 39
        j += 1
        for i in range(n):
            e = _ESC[s[i]]
            if e:
                self.buf[j] = 92
                self.buf[j + 1] = e
                j += 2
            else:
                self.buf[j] = s[i]
                j += 1
        self.buf[j] = 39
        self.size = j + 1
        return 0

    cdef int _put_int(self, long long x) except -1:
        """``x`` in decimal digits (snprintf's "%lld" without its format parsing: ints are most
        of a row's values)."""
        cdef char[24] digits
        cdef int i = 24
        cdef unsigned long long u = (<unsigned long long> -(x + 1)) + 1 if x < 0 else <unsigned long long> x
        while True:
            i -= 1
            digits[i] = c'0' + <char> (u % 10)
            u = u // 10
            if u == 0:
                break
        if x < 0:
            i -= 1
            digits[i] = c'-'
        return self._put(digits + i, 24 - i)

    cdef int _put_value(self, object v) except -1:
        """``value(v)`` written into the buffer; the common types without a bytes object between,
        strings, byte strings and SET members escaped here while ``escape`` holds."""
        cdef type t = type(v)
        cdef int overflow
        cdef long long x
        cdef Py_ssize_t n
        cdef const char* u
        cdef object text = v
        cdef bytes b
        if t is int:
            x = PyLong_AsLongLongAndOverflow(v, &overflow)
            if not overflow:
                return self._put_int(x)
        elif v is None:
            return self._put("NULL", 4)
        elif self.escape:
            if t is bytes:
                self._put("_binary", 7)
                return self._put_escaped(<const unsigned char*> PyBytes_AS_STRING(v), len(v))
            if t is set or t is frozenset:
                text = ",".join(sorted(v))
            if type(text) is str:
                try:
                    u = PyUnicode_AsUTF8AndSize(text, &n)
                except UnicodeEncodeError:   # a lone surrogate: value() hands it to the driver, which refuses it
                    pass
                else:
                    return self._put_escaped(<const unsigned char*> u, n)
        b = self.value(v)
        return self._put(PyBytes_AS_STRING(b), len(b))

    cdef int _ask(self) except -1:
        self.escape = self.own_escape and self.quote("\\") == _BACKSLASHED
        return 0

    cdef bytes value(self, object v):
        cdef type t = type(v)
        cdef char[64] buf
        cdef int n
        cdef object f, r
        # _put_value's fallback: ints reach it only past a long long, None never
        if t is int:
            return b"%d" % v
        if t is str:
            return self.quote(v)
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

    def fill(self, tuple parts, params):
        """``parts[0] + literal(params[0]) + parts[1] + ... + parts[-1]``."""
        self._ask()
        return self._fill(parts, params)

    cdef bytes _fill(self, tuple parts, params):
        cdef Py_ssize_t i, n = len(params)
        cdef bytes part
        if len(parts) != n + 1:
            raise TypeError("not enough arguments for format string" if len(parts) > n + 1
                            else "not all arguments converted during bytes formatting")
        self.size = 0
        part = parts[0]
        self._put(PyBytes_AS_STRING(part), len(part))
        for i in range(n):
            self._put_value(params[i])
            part = parts[i + 1]
            self._put(PyBytes_AS_STRING(part), len(part))
        out = PyBytes_FromStringAndSize(self.buf, self.size)
        if self.cap > KEEP_BYTES:   # a row of large values: its room is not kept for the next
            free(self.buf)
            self.buf, self.cap = NULL, 0
        return out

    def fill_rows(self, tuple parts, list rows):
        """``fill`` for each row of a multi-row statement."""
        self._ask()
        return [self._fill(parts, p) for p in rows]


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
