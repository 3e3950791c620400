"""MysqlMaster: a threaded TCP server on 127.0.0.1 that looks like a MySQL 5.7/8.0/8.4 master.

    b = BinlogBuilder("8.0")
    ...
    with MysqlMaster("8.0", binlog=b, backing=stack["up1"]) as master:
        ep = master.endpoint()          # an Endpoint for shardflow (user/password of the master)
        ...                             # b.insert(...); b.commit(); master.publish()

Its replication state (binlog files, GTID sets, checksum, row metadata, server_uuid) comes
from the BinlogBuilder, as of the last ``publish()`` (the constructor publishes once); a
blocked dump wakes up at each publish. Ordinary statements go to ``backing`` (an Endpoint of
a MariaDB holding the same schemas); without one they are errors and land in ``unanswered``.

What tests can look at: ``queries`` (every COM_QUERY), ``forwarded`` (relayed to MariaDB),
``unanswered`` (neither answered nor relayed), ``ignored`` (SET statements acknowledged
without effect when there is no backing server), ``notes`` (other gaps), ``logins`` ((user,
plugin, "fast" | "full" | "ok" | "denied")), ``dumps`` ((server_id, conn_id) of each dump).
"""

from __future__ import annotations

import itertools
import socket
import socketserver
import threading
from dataclasses import dataclass

from tests.mysql_master.flavours import Flavour, flavour as get_flavour
from tests.mysql_master.gtidset import GtidSet


@dataclass
class Account:
    name: str
    password: str
    plugin: str
    privileges: tuple[str, ...] | None = None     # None: all


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class MysqlMaster:
    def __init__(self, flavour: str | Flavour = "8.0", *, binlog=None, backing=None, user: str = "shardflow",
                 password: str = "shardflow-local", plugin: str | None = None, privileges=None,
                 server_id: int | None = None, compression: bool = False):
        """:param binlog: a BinlogBuilder (its flavour should be this one).
        :param backing: dm_core.db.Endpoint of the MariaDB that answers ordinary statements.
        :param plugin: the user's auth plugin (default: the flavour's default).
        :param privileges: the user's global privileges for SHOW GRANTS (None: all).
        :param compression: what @@binlog_transaction_compression says.
        """
        self.flavour = get_flavour(flavour)
        self.backing = backing
        self.users: dict[str, Account] = {}
        self.add_user(user, password, plugin, privileges)
        self.sha2_cache: dict[str, str] = {}
        self.compression = compression
        self.queries: list[str] = []
        self.forwarded: list[str] = []
        self.unanswered: list[str] = []
        self.ignored: list[str] = []          # SETs acknowledged without a backing server
        self.notes: list[str] = []
        self.logins: list[tuple[str, str, str]] = []
        self.dumps: list[tuple[int, int]] = []
        self._binlog = binlog
        self._explicit_server_id = server_id
        self._cond = threading.Condition()
        self._files: list[tuple[str, bytes]] = []
        self._version = 0
        self._sessions: dict[int, object] = {}
        self._replicas: dict[int, tuple] = {}
        self._ids = itertools.count(8)
        self.server_id = server_id or 1
        self.server_uuid = "00000000-0000-0000-0000-000000000000"
        self.prefix = self.flavour.binlog_prefix
        self.checksum, self.gtid_mode, self.row_metadata = True, True, "MINIMAL"
        self.gtid_executed, self.gtid_purged = GtidSet(), GtidSet()
        self.publish()
        master = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                master._serve(self.request)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self.host, self.port = self._server.server_address
        # a short poll interval: close() (shutdown) waits for one
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,),
                                        name=f"mysql-master-{self.port}", daemon=True)
        self._thread.start()

    # ---- set-up --------------------------------------------------------------------------------
    def add_user(self, name: str, password: str, plugin: str | None = None, privileges=None) -> None:
        self.users[name] = Account(name, password, plugin or self.flavour.auth_plugin,
                                   tuple(privileges) if privileges is not None else None)

    def flush_auth_cache(self) -> None:
        """Forget caching_sha2_password's cache (as FLUSH PRIVILEGES does): the next login
        takes the full authentication path."""
        self.sha2_cache.clear()

    def endpoint(self, user: str | None = None, name: str = "mysql-master"):
        from dm_core.db import Endpoint

        user = user or next(iter(self.users))
        return Endpoint(self.host, self.port, user, self.users[user].password, name=name)

    def publish(self) -> None:
        """Make the builder's binlog as it is now what the master serves (and wake dumps)."""
        b = self._binlog
        with self._cond:
            if b is not None:
                self._files = list(b.files.items())
                self.server_id = self._explicit_server_id or b.server_id
                self.server_uuid = b.server_uuid
                self.prefix = b.prefix
                self.checksum, self.gtid_mode, self.row_metadata = b.checksum, b.gtid_mode, b.row_metadata
                self.gtid_executed, self.gtid_purged = b.gtid_executed.copy(), b.gtid_purged.copy()
            self._version += 1
            self._cond.notify_all()

    def load_files(self, files: dict[str, bytes], *, checksum: bool, row_metadata: str = "MINIMAL") -> None:
        """Serve these binlog files as they are (bytes made elsewhere), instead of a builder's."""
        with self._cond:
            self._binlog = None
            self._files = list(files.items())
            self.checksum, self.row_metadata = checksum, row_metadata
            self._version += 1
            self._cond.notify_all()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        for sess in list(self._sessions.values()):
            sess.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- state the sessions read -------------------------------------------------------------
    def snapshot(self) -> tuple[list[tuple[str, bytes]], int]:
        with self._cond:
            return self._files, self._version

    def wait_for_change(self, version: int, timeout: float):
        with self._cond:
            if self._version == version:
                self._cond.wait(timeout)
            return self._files, self._version

    def last_file(self) -> tuple[str, int]:
        files, _ = self.snapshot()
        return (files[-1][0], len(files[-1][1])) if files else ("", 0)

    def grants_of(self, user: str) -> list[str]:
        fl, acct = self.flavour, self.users[user]
        q = fl.quote
        who = f"{q}{user}{q}@{q}%{q}"
        if acct.privileges is None:
            if fl.v < (8, 0):
                return [f"GRANT ALL PRIVILEGES ON *.* TO {who} WITH GRANT OPTION"]
            return [f"GRANT {', '.join(fl.static_privileges)} ON *.* TO {who} WITH GRANT OPTION",
                    f"GRANT {','.join(fl.dynamic_privileges)} ON *.* TO {who} WITH GRANT OPTION"]
        wanted = [p.upper() for p in acct.privileges]
        static = [p for p in fl.static_privileges if p in wanted]
        dynamic = [p for p in wanted if p not in fl.static_privileges]
        out = [f"GRANT {', '.join(static) or 'USAGE'} ON *.* TO {who}"]
        if dynamic:
            out.append(f"GRANT {','.join(sorted(dynamic))} ON *.* TO {who}")
        return out

    def note(self, text: str) -> None:
        self.notes.append(text)

    # ---- sessions ------------------------------------------------------------------------------
    def _serve(self, sock: socket.socket) -> None:
        from tests.mysql_master.session import Session

        sess = Session(self, sock, next(self._ids))
        with self._cond:
            self._sessions[sess.conn_id] = sess
        sess.run()

    def forget(self, sess) -> None:
        with self._cond:
            self._sessions.pop(sess.conn_id, None)
            self._replicas.pop(sess.conn_id, None)

    def kill(self, conn_id: int, query_only: bool = False) -> bool:
        with self._cond:
            sess = self._sessions.get(conn_id)
        if sess is None:
            return False
        sess.kill()
        return True

    def register_replica(self, conn_id: int, row: tuple) -> None:
        with self._cond:
            self._replicas[conn_id] = row

    def registered_replicas(self) -> list[tuple]:
        with self._cond:
            return list(self._replicas.values())

    def dump_started(self, sess, server_id: int) -> None:
        """A replica's new dump ends its older dumps with the same server_id (MySQL's
        "zombie dump thread" rule)."""
        with self._cond:
            old = [s for s in self._sessions.values()
                   if s is not sess and s.dumping_server_id == server_id and server_id]
            self.dumps.append((server_id, sess.conn_id))
        for s in old:
            s.kill()

    def dump_ended(self, sess) -> None:
        sess.dumping_server_id = None

    @property
    def sessions(self) -> int:
        with self._cond:
            return len(self._sessions)

