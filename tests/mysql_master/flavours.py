"""What differs between the MySQL versions the master impersonates: 5.7, 8.0 and 8.4.

Everything flavour-specific lives here as data, so the encoder, the statement table and the
dump sender read one place. Facts from the MySQL reference manuals and release notes:
- version strings: a 5.7 server started with --log-bin reports ``-log``; 8.x does not;
- default auth plugin: mysql_native_password (5.7), caching_sha2_password (8.0+);
- FORMAT_DESCRIPTION post-header lengths: 38 event types in 5.7 (its first entry is
  START_V3's 56), 41 in 8.0.26+, 42 in 8.4 (GTID_TAGGED), where the v1 row events' lengths
  became 0; TRANSACTION_PAYLOAD's entry is 40 in 8.x (MySQL writes its type code there);
- SHOW BINARY LOG STATUS exists from 8.2, SHOW MASTER STATUS / SHOW MASTER LOGS /
  SHOW SLAVE HOSTS were removed in 8.4, SHOW REPLICAS exists from 8.0.22;
- binlog_row_metadata exists from 8.0.1 (default MINIMAL), binlog_transaction_compression
  from 8.0.20, binlog_row_value_options from 8.0.3;
- sql_mode bit numbering: 5.7 keeps the old modes (POSTGRESQL ... NO_AUTO_CREATE_USER), 8.0
  removed them (their bits unused) and added TIME_TRUNCATE_FRACTIONAL at bit 32.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_POST_HEADER_80 = [0, 13, 0, 8, 0, 0, 0, 0, 4, 0, 4, 0, 0, 0, 98, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0, 0,
                   10, 10, 10, 42, 42, 0, 18, 52, 0, 10, 40, 0]
_POST_HEADER_84 = [0, 13, 0, 8, 0, 0, 0, 0, 4, 0, 4, 0, 0, 0, 99, 0, 4, 26, 8, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0,
                   10, 10, 10, 42, 42, 0, 18, 52, 0, 10, 40, 0, 0]
_POST_HEADER_57 = [56, 13, 0, 8, 0, 0, 0, 0, 4, 0, 4, 0, 0, 0, 95, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0, 0,
                   10, 10, 10, 42, 42, 0, 18, 52, 0]

# sql_mode names by bit (MySQL numbering).
_MODES_COMMON = {0: "REAL_AS_FLOAT", 1: "PIPES_AS_CONCAT", 2: "ANSI_QUOTES", 3: "IGNORE_SPACE",
                 5: "ONLY_FULL_GROUP_BY", 6: "NO_UNSIGNED_SUBTRACTION", 7: "NO_DIR_IN_CREATE", 18: "ANSI",
                 19: "NO_AUTO_VALUE_ON_ZERO", 20: "NO_BACKSLASH_ESCAPES", 21: "STRICT_TRANS_TABLES",
                 22: "STRICT_ALL_TABLES", 23: "NO_ZERO_IN_DATE", 24: "NO_ZERO_DATE", 25: "ALLOW_INVALID_DATES",
                 26: "ERROR_FOR_DIVISION_BY_ZERO", 27: "TRADITIONAL", 29: "HIGH_NOT_PRECEDENCE",
                 30: "NO_ENGINE_SUBSTITUTION", 31: "PAD_CHAR_TO_FULL_LENGTH"}
_MODES_57 = {**_MODES_COMMON, 8: "POSTGRESQL", 9: "ORACLE", 10: "MSSQL", 11: "DB2", 12: "MAXDB",
             13: "NO_KEY_OPTIONS", 14: "NO_TABLE_OPTIONS", 15: "NO_FIELD_OPTIONS", 16: "MYSQL323", 17: "MYSQL40",
             28: "NO_AUTO_CREATE_USER"}
_MODES_80 = {**_MODES_COMMON, 32: "TIME_TRUNCATE_FRACTIONAL"}

_STATIC_PRIVS = ["SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "RELOAD", "SHUTDOWN", "PROCESS", "FILE",
                 "REFERENCES", "INDEX", "ALTER", "SHOW DATABASES", "SUPER", "CREATE TEMPORARY TABLES", "LOCK TABLES",
                 "EXECUTE", "REPLICATION SLAVE", "REPLICATION CLIENT", "CREATE VIEW", "SHOW VIEW", "CREATE ROUTINE",
                 "ALTER ROUTINE", "CREATE USER", "EVENT", "TRIGGER", "CREATE TABLESPACE", "CREATE ROLE", "DROP ROLE"]
_DYNAMIC_80 = ["APPLICATION_PASSWORD_ADMIN", "AUDIT_ABORT_EXEMPT", "AUDIT_ADMIN", "AUTHENTICATION_POLICY_ADMIN",
               "BACKUP_ADMIN", "BINLOG_ADMIN", "BINLOG_ENCRYPTION_ADMIN", "CLONE_ADMIN", "CONNECTION_ADMIN",
               "ENCRYPTION_KEY_ADMIN", "FIREWALL_EXEMPT", "FLUSH_OPTIMIZER_COSTS", "FLUSH_STATUS", "FLUSH_TABLES",
               "FLUSH_USER_RESOURCES", "GROUP_REPLICATION_ADMIN", "GROUP_REPLICATION_STREAM",
               "INNODB_REDO_LOG_ARCHIVE", "INNODB_REDO_LOG_ENABLE", "PASSWORDLESS_USER_ADMIN",
               "PERSIST_RO_VARIABLES_ADMIN", "REPLICATION_APPLIER", "REPLICATION_SLAVE_ADMIN",
               "RESOURCE_GROUP_ADMIN", "RESOURCE_GROUP_USER", "ROLE_ADMIN", "SENSITIVE_VARIABLES_OBSERVER",
               "SERVICE_CONNECTION_ADMIN", "SESSION_VARIABLES_ADMIN", "SET_USER_ID", "SHOW_ROUTINE", "SYSTEM_USER",
               "SYSTEM_VARIABLES_ADMIN", "TABLE_ENCRYPTION_ADMIN", "TELEMETRY_LOG_ADMIN", "XA_RECOVER_ADMIN"]
_DYNAMIC_84 = sorted({*_DYNAMIC_80, "ALLOW_NONEXISTENT_DEFINER", "FLUSH_PRIVILEGES", "OPTIMIZE_LOCAL_TABLE",
                      "SET_ANY_DEFINER", "TRANSACTION_GTID_TAG"} - {"SET_USER_ID"})

# Variables MariaDB has and MySQL does not: asking a MySQL flavour for them is error 1193,
# SHOW VARIABLES leaves them out. (Prefixes.)
MARIADB_ONLY_VARIABLES = (
    "gtid_binlog_", "gtid_current_pos", "gtid_slave_pos", "gtid_domain_id", "gtid_strict_mode",
    "gtid_ignore_duplicates", "gtid_cleanup_batch_size", "gtid_pos_auto_engines", "log_bin_compress",
    "binlog_annotate_row_events", "binlog_commit_wait_", "binlog_optimize_thread_scheduling",
    "binlog_file_cache_size", "binlog_alter_two_phase", "binlog_legacy_event_pos", "binlog_space_limit",
    "aria_", "wsrep", "mariadb_", "slave_connections_", "log_slow_verbosity", "innodb_compression_",
    "binlog_do_db", "binlog_ignore_db", "binlog_gtid_index")
# Status variables MariaDB has and MySQL does not (SHOW STATUS leaves them out).
MARIADB_ONLY_STATUS = ("binlog_snapshot_", "binlog_commits", "binlog_group_commits", "binlog_bytes_written",
                       "binlog_gtid_index", "aria_", "feature_", "wsrep")


@dataclass(frozen=True)
class Flavour:
    name: str                        # "5.7", "8.0", "8.4"
    version: str                     # SELECT VERSION(), the handshake, the FDE
    version_number: int              # GTID events' immediate_server_version
    version_comment: str
    auth_plugin: str                 # the server's default_authentication_plugin
    handshake_collation: int         # the server's default collation id, told in the handshake
    utf8mb4_collation: int           # utf8mb4's default collation id
    post_header: tuple[int, ...]
    sql_modes: dict = field(repr=False)
    default_sql_mode: str = ""
    binlog_prefix: str = "binlog"
    max_allowed_packet: int = 67108864
    static_privileges: tuple[str, ...] = ()
    dynamic_privileges: tuple[str, ...] = ()

    @property
    def v(self) -> tuple[int, int]:
        major, minor = self.name.split(".")
        return int(major), int(minor)

    # statements each version has
    @property
    def has_master_status(self) -> bool:
        return self.v < (8, 4)

    @property
    def has_binary_log_status(self) -> bool:
        return self.v >= (8, 2)

    @property
    def has_replicas(self) -> bool:
        return self.v >= (8, 0)

    @property
    def has_slave_hosts(self) -> bool:
        return self.v < (8, 4)

    @property
    def gtid_event_extras(self) -> bool:
        """GTID events carry commit timestamps, length and server versions (8.0.2+)."""
        return self.v >= (8, 0)

    @property
    def quote(self) -> str:
        """How SHOW GRANTS quotes the user (5.7 with ', 8.0 with `)."""
        return "'" if self.v < (8, 0) else "`"

    def has_variable(self, name: str) -> bool:
        name = name.lower()
        if name.startswith(MARIADB_ONLY_VARIABLES):
            return False
        if name in ("binlog_row_metadata", "binlog_transaction_compression", "binlog_row_value_options",
                    "binlog_transaction_compression_level_zstd", "replica_parallel_workers"):
            return self.v >= (8, 0)
        if name in ("default_authentication_plugin", "expire_logs_days", "master_info_repository"):
            return self.v < (8, 4)
        return True

    def mode_names(self, bits: int) -> list[str]:
        return [n for b, n in sorted(self.sql_modes.items()) if bits >> b & 1]


FLAVOURS = {
    "5.7": Flavour("5.7", "5.7.44-log", 50744, "MySQL Community Server (GPL)", "mysql_native_password", 8, 45,
                   tuple(_POST_HEADER_57), _MODES_57,
                   "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,"
                   "NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION", "mysql-bin", 4194304,
                   tuple(_STATIC_PRIVS[:-2]), ()),
    "8.0": Flavour("8.0", "8.0.36", 80036, "MySQL Community Server - GPL", "caching_sha2_password", 255, 255,
                   tuple(_POST_HEADER_80), _MODES_80,
                   "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,"
                   "NO_ENGINE_SUBSTITUTION", "binlog", 67108864, tuple(_STATIC_PRIVS), tuple(_DYNAMIC_80)),
    "8.4": Flavour("8.4", "8.4.3", 80403, "MySQL Community Server - GPL", "caching_sha2_password", 255, 255,
                   tuple(_POST_HEADER_84), _MODES_80,
                   "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,"
                   "NO_ENGINE_SUBSTITUTION", "binlog", 67108864, tuple(_STATIC_PRIVS), tuple(_DYNAMIC_84)),
}


def flavour(name: str | Flavour) -> Flavour:
    if isinstance(name, Flavour):
        return name
    try:
        return FLAVOURS[name]
    except KeyError:
        raise ValueError(f"unknown MySQL flavour {name!r}: one of {', '.join(FLAVOURS)}") from None


def sql_mode_bits(fl: Flavour, names: str) -> int:
    """The bitmap of a sql_mode name list in ``fl``'s numbering (QUERY events carry it)."""
    by_name = {n: b for b, n in fl.sql_modes.items()}
    return sum(1 << by_name[n] for n in names.split(",") if n in by_name)
