# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Row images → Python values in C: the compiled twin of ``decode.TableCodec``'s generated decoders.

Why: after the window's own loop, decoding the row images is the reader's largest cost (one
Python bytecode per byte of most values). This module reads the same images with the same
values, driven by a column plan that ``decode.py`` builds once per TABLE_MAP and present-column
bitmap (``decode.row_plan``), so the per-column type dispatch stays out of the per-row loop here
too.

Protocol:

- ``decode.py`` builds one ``Image`` per row image shape from a plan: per column
  ``(name, kind, a, b, nullable, aux)`` in column order, ``kind`` one of the ``K_*`` numbers
  ``decode.py`` also defines (the two lists must agree: ``decode.ROW_KINDS`` is checked against
  ``KINDS`` here when the module is loaded), ``a``/``b`` the kind's sizes, ``aux`` the Python
  helper or table a kind needs;
- ``Rows(op, schema, table, make, before, after)`` is then called as ``(buf, p, end) ->
  list[RowChange]``, as the generated decoders are.

Guarantee: the values, their types and the errors for values Python refuses (bad UTF-8, an ENUM
index past its members) are the generated decoders' (``tests/unit/test_binlog_rowcodec.py`` holds
the two to each other, value by value); wherever a value is rare or may be invalid (a zero or
invalid date, a DECIMAL group past its digits, the old TIME, BIT, JSON), the Python helper of the
generated code reads it; TIME2 and SET are read here (``decode.make_time2`` / ``make_set``). A row that runs past the event raises ``ValueError`` here, where the
generated code would read past it.
"""

from cpython.datetime cimport (import_datetime, datetime_new, date_new, PyDateTime_CheckExact,
                               PyDateTime_GET_YEAR, PyDateTime_GET_MONTH, PyDateTime_GET_DAY,
                               PyDateTime_DATE_GET_HOUR, PyDateTime_DATE_GET_MINUTE,
                               PyDateTime_DATE_GET_SECOND, timedelta_new)
from cpython.number cimport PyNumber_Negative
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8, PyUnicode_DecodeASCII
from libc.string cimport memcpy
from libc.stdlib cimport malloc, free

import_datetime()

# the kinds, in decode.ROW_KINDS order
KINDS = ("absent", "int8", "uint8", "int16", "uint16", "int24", "uint24", "int32", "uint32",
         "int64", "uint64", "float", "double", "year", "decimal", "datetime2", "timestamp2", "date",
         "call", "enum", "set", "utf8", "bytes", "codec", "binary", "geometry", "json", "time2")

cdef enum:
    K_ABSENT = 0
    K_INT8 = 1
    K_UINT8 = 2
    K_INT16 = 3
    K_UINT16 = 4
    K_INT24 = 5
    K_UINT24 = 6
    K_INT32 = 7
    K_UINT32 = 8
    K_INT64 = 9
    K_UINT64 = 10
    K_FLOAT = 11
    K_DOUBLE = 12
    K_YEAR = 13
    K_DECIMAL = 14
    K_DATETIME2 = 15
    K_TIMESTAMP2 = 16
    K_DATE = 17
    K_CALL = 18
    K_ENUM = 19
    K_SET = 20
    K_UTF8 = 21
    K_BYTES = 22
    K_CODEC = 23
    K_BINARY = 24
    K_GEOMETRY = 25
    K_JSON = 26
    K_TIME2 = 27

cdef int[10] DIG2BYTES = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4]
cdef unsigned int[10] POW10 = [1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
                               1000000000]
cdef int[13] DAYS = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


cdef inline unsigned long long _be(const unsigned char* s, int n) noexcept:
    cdef unsigned long long v = 0
    cdef int i
    for i in range(n):
        v = (v << 8) | s[i]
    return v


cdef inline unsigned long long _le(const unsigned char* s, int n) noexcept:
    cdef unsigned long long v = 0
    cdef int i
    for i in range(n - 1, -1, -1):
        v = (v << 8) | s[i]
    return v


cdef bint _sizes_fit(int kind, int a, int b) noexcept:
    """Sizes the loop reads without further checks: what a server writes."""
    if kind == K_DECIMAL:
        return 0 <= b <= 30 and 1 <= a <= 65 and b <= a
    if kind == K_DATETIME2 or kind == K_TIMESTAMP2:
        return 0 <= a <= 6
    if kind == K_ENUM or kind == K_SET:
        return 1 <= a <= 8
    if K_UTF8 <= kind <= K_JSON:
        return 1 <= a <= 4
    if kind == K_CALL:
        return a >= 0
    if kind == K_TIME2:
        return 0 <= b <= 6 and a == 3 + (b + 1) // 2
    return True


cdef inline bint _valid_date(int y, int m, int d) noexcept:
    if y < 1 or y > 9999 or m < 1 or m > 12 or d < 1:
        return False
    if m == 2 and (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)):
        return d <= 29
    return d <= DAYS[m]


cdef object _past(Py_ssize_t p, Py_ssize_t end):
    return ValueError(f"a row image runs past its event (value at byte {p}, event ends at {end})")


cdef class Image:
    """One row image's plan: what each column is and how to read it."""

    cdef int n
    cdef int nbytes            # the null bitmap's bytes
    cdef int *kind
    cdef int *a
    cdef int *b
    cdef int *bit              # the column's bit in the null bitmap, -1 if NOT NULL or absent
    cdef tuple names
    cdef tuple aux

    def __cinit__(self, list plan):
        cdef int i, shown = 0
        self.n = len(plan)
        self.kind = <int *> malloc(self.n * sizeof(int))
        self.a = <int *> malloc(self.n * sizeof(int))
        self.b = <int *> malloc(self.n * sizeof(int))
        self.bit = <int *> malloc(self.n * sizeof(int))
        if self.n and not (self.kind and self.a and self.b and self.bit):
            raise MemoryError()
        names, aux = [], []
        for i, (name, kind, a, b, nullable, helper) in enumerate(plan):
            if not 0 <= kind < len(KINDS):
                raise ValueError(f"column {name}: row kind {kind} unknown")
            if not _sizes_fit(kind, a, b):   # row_plan refuses these first: the loop trusts them
                raise ValueError(f"column {name}: row kind {KINDS[kind]} with sizes {a}, {b}")
            self.kind[i], self.a[i], self.b[i] = kind, a, b
            self.bit[i] = -1
            if kind != K_ABSENT:
                if nullable:
                    self.bit[i] = shown
                shown += 1
            names.append(name)
            aux.append(helper)
        self.nbytes = (shown + 7) // 8
        self.names, self.aux = tuple(names), tuple(aux)

    def __dealloc__(self):
        free(self.kind)
        free(self.a)
        free(self.b)
        free(self.bit)

    cdef dict read(self, bytes buf, const unsigned char* s, Py_ssize_t* pp, Py_ssize_t end):
        cdef Py_ssize_t p = pp[0], q, nb0 = p
        cdef int i, k, a, bt, size
        cdef unsigned long long x
        cdef long long sx
        cdef float f
        cdef double dbl
        cdef int y, mo, d, h, mi, sec, micro
        cdef dict row = {}
        cdef object v, key
        if p + self.nbytes > end:
            raise _past(p, end)
        p += self.nbytes
        for i in range(self.n):
            k = self.kind[i]
            bt = self.bit[i]
            if k == K_ABSENT or (bt >= 0 and s[nb0 + (bt >> 3)] >> (bt & 7) & 1):
                row[self.names[i]] = None
                continue
            a = self.a[i]
            if k <= K_YEAR:
                size = a
                if p + size > end:
                    raise _past(p, end)
                if k == K_INT8:
                    v = <signed char> s[p]
                elif k == K_UINT8:
                    v = s[p]
                elif k == K_INT16:
                    v = <short> _le(s + p, 2)
                elif k == K_UINT16:
                    v = <unsigned short> _le(s + p, 2)
                elif k == K_INT24:
                    v = <long long> ((_le(s + p, 3) ^ 0x800000)) - 0x800000
                elif k == K_UINT24:
                    v = _le(s + p, 3)
                elif k == K_INT32:
                    v = <int> _le(s + p, 4)
                elif k == K_UINT32:
                    v = <unsigned int> _le(s + p, 4)
                elif k == K_INT64:
                    v = <long long> _le(s + p, 8)
                elif k == K_UINT64:
                    v = _le(s + p, 8)
                elif k == K_FLOAT:
                    memcpy(&f, s + p, 4)
                    v = <double> f
                elif k == K_DOUBLE:
                    memcpy(&dbl, s + p, 8)
                    v = dbl
                else:  # YEAR: 0 is YEAR 0000
                    v = s[p] + 1900 if s[p] else 0
                p += size
            elif K_UTF8 <= k <= K_JSON:   # the length-prefixed kinds
                if p + a > end:
                    raise _past(p, end)
                q = p + a + <Py_ssize_t> _le(s + p, a)
                p += a
                if q > end:
                    raise _past(p, end)
                if k == K_UTF8:
                    v = PyUnicode_DecodeUTF8(<const char *> s + p, q - p, NULL)
                elif k == K_BYTES:
                    v = PyBytes_FromStringAndSize(<const char *> s + p, q - p) if q > p else ''
                elif k == K_GEOMETRY:
                    v = PyBytes_FromStringAndSize(<const char *> s + p, q - p)
                elif k == K_CODEC:
                    v = (<tuple> self.aux[i])[0](PyBytes_FromStringAndSize(<const char *> s + p, q - p),
                                                 (<tuple> self.aux[i])[1])
                elif k == K_JSON:
                    v = self.aux[i](PyBytes_FromStringAndSize(<const char *> s + p, q - p)) if q > p else None
                else:  # BINARY(n): the binlog drops its trailing 0x00 bytes
                    v = PyBytes_FromStringAndSize(<const char *> s + p, q - p).ljust(self.b[i], b'\x00')
                p = q
            elif k == K_DECIMAL:
                v = _decimal(buf, s, p, end, a, self.b[i], self.aux[i])
                p += _decimal_size(a, self.b[i])
            elif k == K_DATETIME2:
                size = 5 + (a + 1) // 2
                if p + size > end:
                    raise _past(p, end)
                x = _be(s + p, size)
                sx = 8 * (size - 5)
                micro = _micro(x, a)
                y, mo = (x >> (22 + sx) & 131071) // 13, (x >> (22 + sx) & 131071) % 13
                d, h = x >> (17 + sx) & 31, x >> (12 + sx) & 31
                mi, sec = x >> (6 + sx) & 63, x >> sx & 63
                if _valid_date(y, mo, d) and h < 24 and mi < 60 and sec < 60 and micro < 1000000:
                    v = datetime_new(y, mo, d, h, mi, sec, micro, None)
                else:
                    v = self.aux[i](y, mo, d, h, mi, sec, micro, a)
                p += size
            elif k == K_TIMESTAMP2:
                size = 4 + (a + 1) // 2
                if p + size > end:
                    raise _past(p, end)
                x = _be(s + p, size)
                sx = 8 * (size - 4)
                key = x >> sx
                v = (<dict> (<tuple> self.aux[i])[0]).get(key)
                if v is None:
                    v = (<tuple> self.aux[i])[1](key)
                if size > 4:
                    micro = _micro(x, a)
                    if micro:
                        if PyDateTime_CheckExact(v):
                            v = datetime_new(PyDateTime_GET_YEAR(v), PyDateTime_GET_MONTH(v), PyDateTime_GET_DAY(v),
                                             PyDateTime_DATE_GET_HOUR(v), PyDateTime_DATE_GET_MINUTE(v),
                                             PyDateTime_DATE_GET_SECOND(v), micro, None)
                        else:
                            v = v.replace(microsecond=micro)
                p += size
            elif k == K_DATE:
                if p + 3 > end:
                    raise _past(p, end)
                x = _le(s + p, 3)
                y, mo, d = x >> 9 & 0x7FFF, x >> 5 & 15, x & 31
                v = date_new(y, mo, d) if _valid_date(y, mo, d) else self.aux[i](buf, p)
                p += 3
            elif k == K_CALL:
                if p + a > end:
                    raise _past(p, end)
                v = self.aux[i](buf, p)
                p += a
            elif k == K_ENUM or k == K_SET:
                if p + a > end:
                    raise _past(p, end)
                x = _le(s + p, a)
                p += a
                if self.aux[i] is None:
                    v = None
                elif k == K_ENUM:
                    if x >= <unsigned long long> len(<tuple> self.aux[i]):
                        raise IndexError("tuple index out of range")   # as the generated code's lookup
                    v = (<tuple> self.aux[i])[x]
                else:
                    v = _set_of(x, <tuple> self.aux[i])
            elif k == K_TIME2:
                if p + a > end:
                    raise _past(p, end)
                v = _time2(s + p, self.b[i])
                p += a
            else:
                raise ValueError(f"column {self.names[i]}: row kind {k} unknown")
            row[self.names[i]] = v
        pp[0] = p
        return row


cdef set _set_of(unsigned long long mask, tuple members):
    """A SET value: the members whose bit is set (decode.make_set)."""
    cdef set out = set()
    cdef Py_ssize_t j, n = min(len(members), 64)
    for j in range(n):
        if mask >> j & 1:
            out.add(members[j])
    return out


cdef object _time2(const unsigned char* s, int fsp):
    """TIME2 (decode.make_time2): 3 bytes big-endian offset by 0x800000 (sign, hour 10 bits, minute
    6, second 6) and the fraction; a negative time with a fraction stores its integral part one
    lower and the fraction as its complement."""
    cdef int fb = (fsp + 1) // 2
    cdef long long ip = <long long> _be(s, 3) - 0x800000, frac = 0, v, h
    if fb == 3:
        v = <long long> _be(s, 6) - 0x800000000000
        ip = v >> 24      # arithmetic shift and mask: the floor split of Python's ints
        frac = v & 0xFFFFFF
    elif fb:
        frac = <long long> _be(s + 3, fb)
        if ip < 0 and frac:
            ip += 1
            frac -= 1 << (8 * fb)
        frac *= 10000 if fb == 1 else 100
    v = ip * 0x1000000 + frac
    if v < 0:
        v = -v
        h = v >> 24
        return PyNumber_Negative(timedelta_new(0, <int> ((h >> 12 & 0x3FF) * 3600 + (h >> 6 & 63) * 60 + (h & 63)),
                                               <int> (v & 0xFFFFFF)))
    h = v >> 24
    return timedelta_new(0, <int> ((h >> 12 & 0x3FF) * 3600 + (h >> 6 & 63) * 60 + (h & 63)), <int> (v & 0xFFFFFF))


cdef inline int _micro(unsigned long long x, int fsp) noexcept:
    """Microseconds from the fraction's low bytes (odd fsp: stored x10), as decode._frac_expr."""
    cdef int fb = (fsp + 1) // 2
    cdef unsigned long long frac
    if fb == 0:
        return 0
    frac = x & ((1ULL << (8 * fb)) - 1)
    if fsp % 2:
        frac //= 10
    return <int> (frac * POW10[6 - fsp])


cdef inline int _decimal_size(int precision, int scale) noexcept:
    cdef int ip = precision - scale
    return ip // 9 * 4 + DIG2BYTES[ip % 9] + scale // 9 * 4 + DIG2BYTES[scale % 9]


cdef object _decimal(bytes buf, const unsigned char* s, Py_ssize_t p, Py_ssize_t end, int precision, int scale,
                     tuple aux):
    """DECIMAL(precision, scale) as its digits' text, read by ``Decimal``; a group past its
    digits (not a value MySQL writes) goes to the generated code's reader, which reads it as
    it always has."""
    cdef int ip = precision - scale, size = _decimal_size(precision, scale)
    cdef unsigned char[40] raw
    cdef char[96] text
    cdef int groups[16], digits[16], widths[16]
    cdef int ng = 0, i, j, q = 0, t = 0, w
    cdef unsigned int g
    cdef bint neg, nonzero = False
    if p + size > end:
        raise _past(p, end)
    if size > 40:
        return aux[1](buf, p)
    memcpy(raw, s + p, size)
    neg = not raw[0] & 0x80
    raw[0] ^= 0x80
    if neg:
        for i in range(size):
            raw[i] ^= 0xFF
    if ip % 9:
        widths[ng], digits[ng] = DIG2BYTES[ip % 9], ip % 9
        ng += 1
    for i in range(ip // 9 + scale // 9):
        widths[ng], digits[ng] = 4, 9
        ng += 1
    if scale % 9:
        widths[ng], digits[ng] = DIG2BYTES[scale % 9], scale % 9
        ng += 1
    if neg:
        text[t] = c'-'
        t += 1
    for i in range(ng):
        g = <unsigned int> _be(raw + q, widths[i])
        q += widths[i]
        if g >= POW10[digits[i]]:
            return aux[1](buf, p)
        if g:
            nonzero = True
        for j in range(digits[i] - 1, -1, -1):
            text[t + j] = c'0' + g % 10
            g //= 10
        t += digits[i]
    if t == neg:   # DECIMAL(0, 0) has no digits
        text[t] = c'0'
        t += 1
    if not nonzero and not neg:
        t = 0
        text[t] = c'0'
        t += 1
    if scale:
        text[t] = c'E'
        text[t + 1] = c'-'
        t += 2
        w = scale
        if w >= 10:
            text[t] = c'0' + w // 10
            t += 1
        text[t] = c'0' + w % 10
        t += 1
    return aux[0](PyUnicode_DecodeASCII(text, t, NULL))


cdef class Rows:
    """``(buf, p, end) -> list[RowChange]`` for one ROWS event shape of one table."""

    cdef object op, schema, table, make
    cdef Image before, after
    cdef int shape            # 0 insert, 1 update, 2 delete

    def __cinit__(self, str op, schema, table, make, Image first, Image second=None):
        self.op, self.schema, self.table, self.make = op, schema, table, make
        self.shape = {"insert": 0, "update": 1, "delete": 2}[op]
        self.before, self.after = first, second
        if self.shape == 1 and second is None:
            raise ValueError("an update decoder needs both images")

    def __call__(self, buf, Py_ssize_t p, Py_ssize_t end):
        cdef bytes b = buf if type(buf) is bytes else bytes(buf)
        cdef const unsigned char* s = <const unsigned char *> PyBytes_AS_STRING(b)
        cdef list out = []
        cdef dict one, two
        if end > PyBytes_GET_SIZE(b):
            end = PyBytes_GET_SIZE(b)
        while p < end:
            one = self.before.read(b, s, &p, end)
            if self.shape == 0:
                out.append(self.make(self.op, self.schema, self.table, None, one))
            elif self.shape == 2:
                out.append(self.make(self.op, self.schema, self.table, one, None))
            else:
                two = self.after.read(b, s, &p, end)
                out.append(self.make(self.op, self.schema, self.table, one, two))
        return out
