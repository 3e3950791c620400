# cython: language_level=3
"""The text path's line read in C: a line query's rows, read from a mysqlclient connection
with libmariadb's own calls, into blocks of newline-ended text (compiled_lines.py says why and
when it is used; text_rows.read_lines is the pure-Python path it replaces).

The connection is mysqlclient's: its object holds the ``MYSQL`` struct right after the Python
object header (every mysqlclient release so far), and the caller checks that the struct found
there is the connection's (the same thread id, the same client library) before calling
:func:`blocks`. The GIL is released while rows are read: the connection must not be used by
another thread meanwhile.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.object cimport PyObject
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy
from libc.stdint cimport uint32_t

ABI = 1   # what compiled_lines expects; raised when blocks() changes its contract


cdef extern from "mysql.h" nogil:
    ctypedef struct MYSQL:
        pass
    ctypedef struct MYSQL_RES:
        pass
    ctypedef char **MYSQL_ROW
    int mysql_real_query(MYSQL *mysql, const char *q, unsigned long length)
    MYSQL_RES *mysql_use_result(MYSQL *mysql)
    MYSQL_ROW mysql_fetch_row(MYSQL_RES *result)
    unsigned long *mysql_fetch_lengths(MYSQL_RES *result)
    unsigned int mysql_num_fields(MYSQL_RES *result)
    void mysql_free_result(MYSQL_RES *result)
    unsigned int mysql_errno(MYSQL *mysql)
    const char *mysql_error(MYSQL *mysql)
    unsigned long mysql_thread_id(MYSQL *mysql)
    const char *mysql_get_client_info()


cdef inline MYSQL *_handle(conn):
    return <MYSQL *>(<char *><PyObject *>conn + sizeof(PyObject))


def thread_id(conn):
    """The thread id of the struct where mysqlclient keeps it (compared with conn.thread_id())."""
    return mysql_thread_id(_handle(conn))


def client_info():
    """The libmariadb this module calls (compared with mysqlclient's, which must be the same)."""
    return mysql_get_client_info().decode()


cdef _error(MYSQL *m, what):
    import MySQLdb
    code = mysql_errno(m)
    return MySQLdb.OperationalError(code, mysql_error(m).decode("utf-8", "replace") or what)


def blocks(conn, bytes query, Py_ssize_t block_bytes=1 << 20):
    """Run ``query`` (one column per row) on ``conn`` unbuffered; yield ``(text, ends, rows)``
    per block of about ``block_bytes``: the rows' lines, each followed by a newline, and the
    offset in ``text`` where each line's newline is (uint32, native order). A NULL line or a
    second column is an error, never a line dropped."""
    cdef MYSQL *m = _handle(conn)
    cdef MYSQL_RES *res = NULL
    cdef MYSQL_ROW row = NULL
    cdef unsigned long *lens
    cdef const char *q = query
    cdef unsigned long qlen = len(query)
    cdef char *buf = NULL
    cdef uint32_t *ends = NULL
    cdef size_t used = 0, cap = 0, n = 0, ncap = 0, need
    cdef int rc = 0, done = 0, bad = 0
    with nogil:
        rc = mysql_real_query(m, q, qlen)
    if rc != 0:
        raise _error(m, "the line query failed")
    res = mysql_use_result(m)
    if res == NULL:
        raise _error(m, "the line query returned no rows")
    try:
        if mysql_num_fields(res) != 1:
            raise ValueError("a line query returns one column")
        cap, ncap = <size_t>block_bytes + 65536, 16384
        buf, ends = <char *>malloc(cap), <uint32_t *>malloc(ncap * sizeof(uint32_t))
        if buf == NULL or ends == NULL:
            raise MemoryError()
        while not done:
            used, n = 0, 0
            with nogil:
                while used < <size_t>block_bytes:
                    row = mysql_fetch_row(res)
                    if row == NULL:
                        done = 1
                        break
                    if row[0] == NULL:
                        bad = 1
                        break
                    lens = mysql_fetch_lengths(res)
                    need = used + lens[0] + 1
                    if need > cap or n == ncap:
                        break   # grown below, with the GIL (the row stays in hand)
                    used = _append(buf, used, row[0], lens[0], ends, n)
                    n += 1
                    row = NULL
            if bad:
                raise ValueError("the line query gave NULL for a row (a line is never NULL)")
            if done and mysql_errno(m) != 0:
                raise _error(m, "the line query's rows stopped")
            if row != NULL:     # the block's buffers were too small for this row
                if n == ncap:
                    ncap *= 2
                    ends = <uint32_t *>_grow(ends, ncap * sizeof(uint32_t))
                if need > cap:
                    cap = need + (cap >> 1)
                    buf = <char *>_grow(buf, cap)
                used = _append(buf, used, row[0], lens[0], ends, n)
                n += 1
                row = NULL
            if n:
                yield (PyBytes_FromStringAndSize(buf, used),
                       PyBytes_FromStringAndSize(<char *>ends, n * sizeof(uint32_t)), n)
    finally:
        with nogil:
            mysql_free_result(res)   # reads what is left of the result first
        free(buf)
        free(ends)


cdef inline size_t _append(char *buf, size_t used, const char *line, unsigned long length, uint32_t *ends,
                           size_t n) noexcept nogil:
    """The line and its newline at ``buf + used``, the newline's offset as the ``n``-th end;
    returns the bytes used after it (the caller made room for both)."""
    memcpy(buf + used, line, length)
    buf[used + length] = 10
    ends[n] = <uint32_t>(used + length)
    return used + length + 1


cdef void *_grow(void *p, size_t size) except NULL:
    cdef void *q = realloc(p, size)
    if q == NULL:
        raise MemoryError()
    return q
