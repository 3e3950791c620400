"""One client connection of the master: handshake, authentication, then commands.

Authentication follows the user's plugin. The handshake offers the flavour's default plugin
with a fresh scramble; a client answering for another plugin, or a user of another plugin,
gets an AuthSwitchRequest (0xFE, plugin name, the same scramble) as MySQL sends. Wrong
password: ERR 1045 (SQLSTATE 28000).

Commands: COM_QUERY (the statement table in answers.py, else relayed to the backing
MariaDB), COM_INIT_DB, COM_PING, COM_QUIT, COM_FIELD_LIST (relayed), COM_REGISTER_SLAVE,
COM_BINLOG_DUMP and COM_BINLOG_DUMP_GTID (dump.py). Anything else is ERR 1047.
"""

from __future__ import annotations

import socket
import struct

from tests.mysql_master import answers, auth
from tests.mysql_master import protocol as p
from tests.mysql_master.backing import Backing, Response


class Session:
    def __init__(self, master, sock: socket.socket, conn_id: int):
        self.master = master
        self.fl = master.flavour
        self.sock = sock
        self.io = p.PacketIO(sock)
        self.conn_id = conn_id
        self.user = ""
        self.db: str | None = None
        self.user_vars: dict[str, object] = {}
        self.backing: Backing | None = None
        self.charset = 255
        self.killed = False
        self.dumping_server_id: int | None = None

    # ---- life cycle --------------------------------------------------------------------------
    def run(self) -> None:
        try:
            if self._login():
                self._commands()
        except OSError:            # the client went away, or KILL / close() shut the socket
            pass
        except Exception as e:     # a gap in the master: an error for the client, a note for the test
            import traceback

            self.master.note(f"session {self.conn_id} failed: {traceback.format_exc()}")
            try:
                self.io.write(p.err_packet(1105, f"test MySQL master failed: {type(e).__name__}: {e}"))
            except OSError:
                pass
        finally:
            self.close()

    def close(self) -> None:
        self.master.forget(self)
        if self.backing is not None:
            self.backing.close()
            self.backing = None
        try:
            self.sock.close()
        except OSError:
            pass

    def kill(self) -> None:
        """End the session from another thread (KILL, a replica's newer dump, the master's close)."""
        self.killed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ---- login -------------------------------------------------------------------------------
    def _login(self) -> bool:
        salt = auth.scramble()
        self.io.seq = 0
        self.io.write(p.handshake_v10(self.fl.version, self.conn_id, salt, self.fl.auth_plugin,
                                      self.fl.handshake_collation))
        payload = self.io.read()
        if payload is None:
            return False
        hs = p.HandshakeResponse(payload)
        self.user, self.charset = hs.user, hs.charset
        account = self.master.users.get(hs.user)
        plugin = account.plugin if account else self.fl.auth_plugin
        response = hs.auth
        if hs.plugin != plugin:                                  # AuthSwitchRequest
            self.io.write(b"\xfe" + plugin.encode() + b"\x00" + salt + b"\x00")
            response = self.io.read() or b""
        if account is None or not self._check(account, plugin, salt, response):
            self.master.logins.append((hs.user, plugin, "denied"))
            self.io.write(p.err_packet(1045, f"Access denied for user '{hs.user}'@'127.0.0.1' (using password: "
                                             f"{'YES' if response else 'NO'})", "28000"))
            return False
        if self.master.backing is not None:
            try:
                from pymysql.charset import charset_by_id

                cs = charset_by_id(self.charset).name if self.charset else "utf8mb4"
                self.backing = Backing(self.master.backing, hs.database, "utf8mb4" if cs == "utf8mb3" else cs)
            except Exception as e:                               # unknown database, backing down
                errno = e.args[0] if getattr(e, "args", None) and isinstance(e.args[0], int) else 1105
                self.io.write(p.err_packet(errno, str(e.args[-1]) if e.args else str(e)))
                return False
        self.db = hs.database
        self.io.write(p.ok_packet())
        return True

    def _check(self, account, plugin: str, salt: bytes, response: bytes) -> bool:
        if plugin == auth.NATIVE:
            ok = auth.native_ok(account.password, salt, response)
            self.master.logins.append((account.name, plugin, "ok" if ok else "denied"))
            return ok
        if not account.password:
            return response == b""
        if self.master.sha2_cache.get(account.name) == account.password:   # cached: the scramble decides
            ok = auth.sha2_scramble_ok(account.password, salt, response)
            if ok:
                self.io.write(auth.FAST_AUTH_SUCCESS)
            self.master.logins.append((account.name, plugin, "fast" if ok else "denied"))
            return ok
        self.io.write(auth.PERFORM_FULL_AUTH)   # not cached: the server cannot check the scramble
        answer = self.io.read() or b""
        if answer == auth.REQUEST_PUBLIC_KEY:
            self.io.write(b"\x01" + auth.public_key_pem())
            answer = self.io.read() or b""
        password = auth.rsa_password(answer, salt)
        ok = password == account.password
        if ok:
            self.master.sha2_cache[account.name] = account.password
        self.master.logins.append((account.name, plugin, "full" if ok else "denied"))
        return ok

    # ---- commands ----------------------------------------------------------------------------
    def _commands(self) -> None:
        from tests.mysql_master.dump import register_slave, serve_dump, serve_dump_gtid

        while not self.killed:
            payload = self.io.read()
            if not payload:
                return
            cmd, arg = payload[0], payload[1:]
            if cmd == p.COM_QUIT:
                return
            if cmd == p.COM_PING:
                self.io.write(p.ok_packet())
            elif cmd == p.COM_QUERY:
                self.io.write(*self.query(arg.decode("utf-8", "surrogateescape")))
            elif cmd == p.COM_INIT_DB:
                self.io.write(*self._init_db(arg))
            elif cmd == p.COM_FIELD_LIST and self.backing is not None:
                self.io.write(*self.backing.field_list(arg).payloads)
            elif cmd == p.COM_REGISTER_SLAVE:
                register_slave(self, arg)
                self.io.write(p.ok_packet())
            elif cmd == p.COM_BINLOG_DUMP:
                serve_dump(self, arg)
                return
            elif cmd == p.COM_BINLOG_DUMP_GTID:
                serve_dump_gtid(self, arg)
                return
            else:
                self.master.note(f"command {cmd:#04x} not supported")
                self.io.write(p.err_packet(1047, "Unknown command", "08S01"))

    def query(self, sql: str) -> list[bytes]:
        self.master.queries.append(sql)
        out = answers.answer(self, sql)
        if out is not None:
            return out
        if self.backing is None:
            return self.unanswered(sql)
        return self.forward_payloads(sql)

    def _init_db(self, name: bytes) -> list[bytes]:
        if self.backing is None:
            self.db = name.decode()
            return [p.ok_packet()]
        resp = self.backing.init_db(name)
        if not resp.is_error:
            self.db = name.decode()
        return resp.payloads

    # ---- helpers for answers.py ----------------------------------------------------------------
    def forward(self, sql: str) -> Response:
        self.master.forwarded.append(sql)
        try:
            return self.backing.query(sql.encode("utf-8", "surrogateescape"))
        except Exception as e:       # the backing connection broke: say so, end the session
            self.killed = True
            return Response([p.err_packet(2013, f"Lost connection to the backing server: {e}")])

    def forward_payloads(self, sql: str) -> list[bytes]:
        return self.forward(sql).payloads

    def unanswered(self, sql: str) -> list[bytes]:
        """A statement neither the table nor a backing server answers: logged, and an error."""
        self.master.unanswered.append(sql)
        return [p.err_packet(1105, f"test MySQL master: no answer for {sql[:200]!r} (no backing server)")]

    def result(self, columns, rows) -> list[bytes]:
        return p.result_set(columns, rows, self.charset or 255)

    def err(self, errno: int, message: str, sqlstate: str = "HY000") -> list[bytes]:
        return [p.err_packet(errno, message, sqlstate)]

    @staticmethod
    def ok_packet() -> bytes:
        return p.ok_packet()

    def user_var_int(self, name: str) -> int | None:
        v = self.user_vars.get(name)
        try:
            return int(v) if v is not None else None
        except (TypeError, ValueError):
            return None


def unpack_register(arg: bytes) -> tuple[int, str, int, int]:
    """COM_REGISTER_SLAVE: server_id u32, host, user, password (length byte + bytes each),
    port u16, replication rank u32, master id u32 → (server_id, host, port, master_id)."""
    (sid,) = struct.unpack_from("<I", arg, 0)
    q = 4
    fields = []
    for _ in range(3):
        n = arg[q]
        fields.append(arg[q + 1:q + 1 + n].decode("utf-8", "replace"))
        q += 1 + n
    port, _rank, master_id = struct.unpack_from("<HII", arg, q)
    return sid, fields[0], port, master_id
