"""MySQL client/server protocol: packet framing and the generic packets (OK, ERR, EOF,
text result sets, handshake).

Written from the protocol's description (dev.mysql.com "Client/Server Protocol"): every
packet is a 3-byte little-endian payload length, a 1-byte sequence number, the payload; a
payload of 0xFFFFFF bytes or more continues in the next packet. Integers are little-endian;
"length-encoded" integers take 1, 3, 4 or 9 bytes (prefixes 0xFC, 0xFD, 0xFE).

The server always speaks the 4.1 protocol with classic EOF packets (it never advertises
CLIENT_DEPRECATE_EOF): the packets it relays from the backing MariaDB, which pymysql reads
the same way, then need no rewriting.
"""

from __future__ import annotations

import struct

MAX_PAYLOAD = 0xFFFFFF

# Capability flags the server advertises (CLIENT_* in the protocol's documentation).
CLIENT_LONG_PASSWORD = 0x1
CLIENT_FOUND_ROWS = 0x2
CLIENT_LONG_FLAG = 0x4
CLIENT_CONNECT_WITH_DB = 0x8
CLIENT_PROTOCOL_41 = 0x200
CLIENT_TRANSACTIONS = 0x2000
CLIENT_SECURE_CONNECTION = 0x8000
CLIENT_MULTI_STATEMENTS = 0x10000
CLIENT_MULTI_RESULTS = 0x20000
CLIENT_PS_MULTI_RESULTS = 0x40000
CLIENT_PLUGIN_AUTH = 0x80000
CLIENT_CONNECT_ATTRS = 0x100000
CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA = 0x200000
SERVER_CAPABILITIES = (CLIENT_LONG_PASSWORD | CLIENT_FOUND_ROWS | CLIENT_LONG_FLAG | CLIENT_CONNECT_WITH_DB
                       | CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS | CLIENT_SECURE_CONNECTION
                       | CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS | CLIENT_PS_MULTI_RESULTS
                       | CLIENT_PLUGIN_AUTH | CLIENT_CONNECT_ATTRS | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA)

SERVER_STATUS_AUTOCOMMIT = 0x0002
SERVER_MORE_RESULTS_EXISTS = 0x0008

# Column types of the text result sets the master builds itself (MYSQL_TYPE_*).
TYPE_LONGLONG = 8
TYPE_VAR_STRING = 253
BINARY_COLLATION = 63
NUM_FLAG = 0x8000
UNSIGNED_FLAG = 0x20

# Command bytes (COM_*).
COM_QUIT, COM_INIT_DB, COM_QUERY, COM_FIELD_LIST, COM_PING = 0x01, 0x02, 0x03, 0x04, 0x0E
COM_BINLOG_DUMP, COM_REGISTER_SLAVE, COM_BINLOG_DUMP_GTID = 0x12, 0x15, 0x1E


def lenenc_int(n: int) -> bytes:
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + struct.pack("<H", n)
    if n < 1 << 24:
        return b"\xfd" + struct.pack("<I", n)[:3]
    return b"\xfe" + struct.pack("<Q", n)


def lenenc_str(b: bytes) -> bytes:
    return lenenc_int(len(b)) + b


def read_lenenc_int(buf: bytes, p: int) -> tuple[int | None, int]:
    """(value, next offset); None for the NULL marker 0xFB of text rows."""
    c = buf[p]
    if c < 0xFB:
        return c, p + 1
    if c == 0xFB:
        return None, p + 1
    if c == 0xFC:
        return int.from_bytes(buf[p + 1:p + 3], "little"), p + 3
    if c == 0xFD:
        return int.from_bytes(buf[p + 1:p + 4], "little"), p + 4
    return int.from_bytes(buf[p + 1:p + 9], "little"), p + 9


def read_lenenc_str(buf: bytes, p: int) -> tuple[bytes | None, int]:
    n, p = read_lenenc_int(buf, p)
    if n is None:
        return None, p
    return bytes(buf[p:p + n]), p + n


class PacketIO:
    """Packets over one socket: reads whole payloads, writes with the running sequence."""

    def __init__(self, sock):
        self.sock = sock
        self.rfile = sock.makefile("rb")
        self.seq = 0

    def read(self) -> bytes | None:
        """The next client payload (several packets joined), or None at end of stream."""
        parts = []
        while True:
            head = self.rfile.read(4)
            if len(head) < 4:
                return None
            n = head[0] | head[1] << 8 | head[2] << 16
            self.seq = (head[3] + 1) & 0xFF
            body = self.rfile.read(n)
            if len(body) < n:
                return None
            parts.append(body)
            if n < MAX_PAYLOAD:
                return b"".join(parts)

    def frame(self, payload: bytes) -> bytes:
        """``payload`` as wire packets, advancing the sequence number."""
        out = []
        p = 0
        while True:
            chunk = payload[p:p + MAX_PAYLOAD]
            out.append(struct.pack("<I", len(chunk))[:3] + bytes([self.seq]) + chunk)
            self.seq = (self.seq + 1) & 0xFF
            p += MAX_PAYLOAD
            if len(chunk) < MAX_PAYLOAD:
                return b"".join(out)

    def write(self, *payloads: bytes) -> None:
        self.sock.sendall(b"".join(self.frame(p) for p in payloads))


# ---- generic packets ---------------------------------------------------------------------
def ok_packet(affected: int = 0, insert_id: int = 0, status: int = SERVER_STATUS_AUTOCOMMIT,
              warnings: int = 0, info: bytes = b"") -> bytes:
    return b"\x00" + lenenc_int(affected) + lenenc_int(insert_id) + struct.pack("<HH", status, warnings) + info


def err_packet(errno: int, message: str, sqlstate: str = "HY000") -> bytes:
    return b"\xff" + struct.pack("<H", errno) + b"#" + sqlstate.encode()[:5] + message.encode("utf-8")


def eof_packet(status: int = SERVER_STATUS_AUTOCOMMIT, warnings: int = 0) -> bytes:
    return b"\xfe" + struct.pack("<HH", warnings, status)


def column_def(name: str, kind: str = "str", charset: int = 255, table: str = "") -> bytes:
    """A Protocol::ColumnDefinition41; ``kind`` "int" (BIGINT UNSIGNED, which pymysql reads
    as int) or "str" (VARCHAR in the connection's charset)."""
    enc = name.encode("utf-8")
    if kind == "int":
        ctype, cs, length, flags = TYPE_LONGLONG, BINARY_COLLATION, 20, NUM_FLAG | UNSIGNED_FLAG
    else:
        ctype, cs, length, flags = TYPE_VAR_STRING, charset, 1024, 0
    return (lenenc_str(b"def") + lenenc_str(b"") + lenenc_str(table.encode()) + lenenc_str(table.encode())
            + lenenc_str(enc) + lenenc_str(enc) + b"\x0c" + struct.pack("<HIBHB", cs, length, ctype, flags, 0)
            + b"\x00\x00")


def text_row(values) -> bytes:
    out = []
    for v in values:
        if v is None:
            out.append(b"\xfb")
        elif isinstance(v, (bytes, bytearray)):
            out.append(lenenc_str(bytes(v)))
        else:
            out.append(lenenc_str(str(v).encode("utf-8")))
    return b"".join(out)


def result_set(columns: list[tuple[str, str]], rows, charset: int = 255) -> list[bytes]:
    """The payloads of a text result set: count, definitions, EOF, rows, EOF."""
    out = [lenenc_int(len(columns))]
    out += [column_def(n, k, charset) for n, k in columns]
    out.append(eof_packet())
    out += [text_row(r) for r in rows]
    out.append(eof_packet())
    return out


def column_name(defn: bytes) -> str:
    """The (alias) name of a ColumnDefinition41 payload."""
    p = 0
    for _ in range(4):   # catalog, schema, table, org_table
        _, p = read_lenenc_str(defn, p)
    name, _ = read_lenenc_str(defn, p)
    return (name or b"").decode("utf-8", "replace")


def parse_text_row(payload: bytes, ncols: int) -> list[bytes | None]:
    out, p = [], 0
    for _ in range(ncols):
        v, p = read_lenenc_str(payload, p)
        out.append(v)
    return out


# ---- handshake ---------------------------------------------------------------------------
def handshake_v10(version: str, conn_id: int, scramble: bytes, plugin: str, charset: int) -> bytes:
    """Protocol::HandshakeV10 with a 20-byte scramble (8 + 12, each part NUL-terminated)."""
    caps = SERVER_CAPABILITIES
    return (b"\x0a" + version.encode() + b"\x00" + struct.pack("<I", conn_id) + scramble[:8] + b"\x00"
            + struct.pack("<HBHH", caps & 0xFFFF, charset, SERVER_STATUS_AUTOCOMMIT, caps >> 16)
            + bytes([len(scramble) + 1]) + b"\x00" * 10 + scramble[8:] + b"\x00" + plugin.encode() + b"\x00")


class HandshakeResponse:
    """Protocol::HandshakeResponse41, as far as the master needs it."""

    def __init__(self, payload: bytes):
        self.caps, self.max_packet, self.charset = struct.unpack_from("<IIB", payload, 0)
        p = 32
        end = payload.index(b"\x00", p)
        self.user = payload[p:end].decode("utf-8", "replace")
        p = end + 1
        if self.caps & CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA:
            auth, p = read_lenenc_str(payload, p)
        elif self.caps & CLIENT_SECURE_CONNECTION:
            n = payload[p]
            auth, p = payload[p + 1:p + 1 + n], p + 1 + n
        else:
            end = payload.index(b"\x00", p)
            auth, p = payload[p:end], end + 1
        self.auth = auth or b""
        self.database = None
        if self.caps & CLIENT_CONNECT_WITH_DB and p < len(payload):
            end = payload.index(b"\x00", p)
            self.database = payload[p:end].decode("utf-8", "replace") or None
            p = end + 1
        self.plugin = ""
        if self.caps & CLIENT_PLUGIN_AUTH and p < len(payload):
            end = payload.find(b"\x00", p)
            end = len(payload) if end < 0 else end
            self.plugin = payload[p:end].decode("ascii", "replace")
