"""The backing MariaDB: ordinary statements are relayed to it byte for byte.

Each client session gets its own backing connection (opened at login, with the client's
database and charset), so session state — SET statements, transactions, the current
database — lives where the statements run. A statement goes out as COM_QUERY through
pymysql; the response packets are read raw from pymysql's socket buffer and handed back
unparsed, so types, flags, NULLs and errors reach the client exactly as MariaDB sent them.
Both sides speak the 4.1 protocol with EOF packets, which is what makes that valid. The
few statements whose rows the master adjusts (SHOW VARIABLES, SHOW STATUS, sql_mode) are
parsed from the same packets (``Response``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.mysql_master import protocol as p


@dataclass
class Response:
    payloads: list[bytes]                        # every packet of the response, in order
    columns: list[bytes] = field(default_factory=list)   # first result set's column definitions
    rows: list[bytes] = field(default_factory=list)      # its row payloads

    @property
    def is_error(self) -> bool:
        return bool(self.payloads) and self.payloads[0][:1] == b"\xff"

    @property
    def names(self) -> list[str]:
        return [p.column_name(c) for c in self.columns]

    def values(self) -> list[list[bytes | None]]:
        return [p.parse_text_row(r, len(self.columns)) for r in self.rows]

    def with_rows(self, rows: list[list]) -> list[bytes]:
        """The first result set again with other rows (same column definitions)."""
        return ([p.lenenc_int(len(self.columns))] + self.columns + [p.eof_packet()]
                + [p.text_row(r) for r in rows] + [p.eof_packet()])


class Backing:
    def __init__(self, ep, database: str | None, charset: str):
        import pymysql
        from pymysql.constants import CLIENT

        self.conn = pymysql.connect(host=ep.host, port=int(ep.port), user=ep.user, password=ep.password,
                                    database=database, charset=charset, autocommit=True, connect_timeout=10,
                                    client_flag=CLIENT.MULTI_STATEMENTS, local_infile=False)

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:
            pass

    def query(self, sql: bytes) -> Response:
        from pymysql.constants import COMMAND

        self.conn._execute_command(COMMAND.COM_QUERY, sql)
        return self._response()

    def init_db(self, name: bytes) -> Response:
        from pymysql.constants import COMMAND

        self.conn._execute_command(COMMAND.COM_INIT_DB, name)
        return self._response()

    def field_list(self, arg: bytes) -> Response:
        """COM_FIELD_LIST: column definitions then EOF (or an error)."""
        from pymysql.constants import COMMAND

        self.conn._execute_command(COMMAND.COM_FIELD_LIST, arg)
        out = []
        while True:
            pkt = self._read()
            out.append(pkt)
            if pkt[:1] == b"\xff" or (pkt[:1] == b"\xfe" and len(pkt) < 9):
                return Response(out)

    def _read(self) -> bytes:
        rfile = self.conn._rfile
        parts = []
        while True:
            head = rfile.read(4)
            if len(head) < 4:
                raise ConnectionError("the backing server closed the connection")
            n = head[0] | head[1] << 8 | head[2] << 16
            parts.append(rfile.read(n))
            if n < p.MAX_PAYLOAD:
                return b"".join(parts)

    def _response(self) -> Response:
        """All packets of one response, through every result of a multi-result answer."""
        resp = Response([])
        first = True
        while True:
            pkt = self._read()
            resp.payloads.append(pkt)
            kind = pkt[0]
            if kind == 0xFF:
                return resp
            if kind == 0x00:
                _, q = p.read_lenenc_int(pkt, 1)
                _, q = p.read_lenenc_int(pkt, q)
                status = int.from_bytes(pkt[q:q + 2], "little")
                if not status & p.SERVER_MORE_RESULTS_EXISTS:
                    return resp
                first = False
                continue
            if kind == 0xFB:
                raise ConnectionError("LOAD DATA LOCAL is not relayed by the test master")
            ncols, _ = p.read_lenenc_int(pkt, 0)
            for _ in range(ncols):
                col = self._read()
                resp.payloads.append(col)
                if first:
                    resp.columns.append(col)
            resp.payloads.append(self._read())      # EOF after the definitions
            while True:
                row = self._read()
                resp.payloads.append(row)
                if row[:1] == b"\xff":
                    return resp
                if row[:1] == b"\xfe" and len(row) < 9:
                    status = int.from_bytes(row[3:5], "little")
                    break
                if first:
                    resp.rows.append(row)
            first = False
            if not status & p.SERVER_MORE_RESULTS_EXISTS:
                return resp
