"""Column mapping: rewrite one column of every row so merged shards do not collide.

DM's column-mapping semantics (tidb-tools ``pkg/column-mapping``): one rule per table
(table-level rules beat schema-level ones; two at the same level is an error), three
expressions in a registry (``EXPRESSIONS``):

* ``partition id`` -- arguments ``[instance id, schema prefix, table prefix, separator?]``.
  The value becomes ``instance<<59 | schema_suffix<<52 | table_suffix<<44 | id``: 1 sign bit,
  4 bits of instance id, 7 bits of schema suffix, 8 bits of table suffix, 44 bits of the
  original id. The suffix is what follows ``prefix + separator`` (separator "" by default)
  in the name, as an integer; a name equal to the prefix gives 0. An empty argument drops its
  field *and its bits*: the fields after it move up (``["1", "", "t_"]`` puts the table
  suffix at bit 51), while the id keeps its 44 bits: DM checks every id against 2**44
  whatever was dropped (its ``maxOriginID``), so an id outside ``[0, 2**44)`` is an error,
  never a silent collision. The id is read from ``source-column``; DM reads the target
  column whatever ``source-column`` says, so an empty ``source-column`` reads ``target-column``
  (check-task warns when the two name different columns). Integers stay integers, integer
  strings stay strings, NULL stays NULL.
* ``add prefix`` / ``add suffix`` -- one argument, concatenated to the target column's
  string value.

The full load needs the same result as the sync path, so each kind carries its rewrite three
ways, side by side: Python (``map_row``, the syncer), Spark SQL (``spark_sql``, the JDBC
path) and the upstream's SQL (``mysql_sql``, the text path); tests/e2e/test_column_mapping_spark.py
holds the first two to the same answers.

    >>> rule = ColumnMappingRule("schema_*", "table_*", "id", "id", "partition id", ["1", "schema_", "table_"])
    >>> plan = ColumnMapper([rule]).plan("schema_2", "table_3", ["id", "name"])
    >>> t = plan.transforms[0]
    >>> (t.column, t.index, t.or_value == 1 << 59 | 2 << 52 | 3 << 44, t.id_bits)
    ('id', 0, True, 44)
    >>> plan.map_row([123, "x"]) == [1 << 59 | 2 << 52 | 3 << 44 | 123, "x"]
    True
    >>> dropped = ColumnMappingRule("schema_*", "table_*", "", "id", "partition id", ["1", "", "table_"])
    >>> ColumnMapper([dropped]).plan("schema_2", "table_3", ["id"]).map_row([123]) == [1 << 59 | 3 << 51 | 123]
    True
    >>> ColumnMapper([dropped]).plan("schema_2", "table_3", ["id"]).transforms[0].id_bits
    44
    >>> ColumnMapper([rule]).plan("schema_2", "table_3", ["id"]).map_row([1 << 44])
    Traceback (most recent call last):
    ...
    dm_core.errors.Terminal: [code=10001:config] column mapping (partition id) of `schema_2`.`table_3`.`id`: value 17592186044416 is out of range [0, 2**44)
    workaround: Change the column-mapping rule (or the data): partition id only fits ids in [0, 2**44).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Callable, Union

from dm_core.errors import ErrorCode
from dm_core.rules.patterns import RuleError, Selector

PARTITION_ID, ADD_PREFIX, ADD_SUFFIX = "partition id", "add prefix", "add suffix"

SIGN_BITS, INSTANCE_BITS, SCHEMA_BITS, TABLE_BITS = 1, 4, 7, 8
ID_BITS = 64 - SIGN_BITS - INSTANCE_BITS - SCHEMA_BITS - TABLE_BITS   # 44, also when a field is dropped


@dataclass(frozen=True)
class ColumnMappingRule:
    """One entry of ``column-mappings``."""

    schema_pattern: str
    table_pattern: str = ""
    source_column: str = ""
    target_column: str = ""
    expression: str = ""
    arguments: list[str] = field(default_factory=list)
    create_table_query: str = ""


@dataclass(frozen=True)
class PartitionId:
    """``target = source | or_value`` after checking ``0 <= source < 2**id_bits``."""

    column: str
    index: int
    or_value: int
    id_bits: int
    source_column: str | None = None   # DM reads the source column; usually the same column
    source_index: int | None = None

    def __post_init__(self):
        if self.source_column is None:
            object.__setattr__(self, "source_column", self.column)
            object.__setattr__(self, "source_index", self.index)

    @property
    def reads(self) -> str:
        return self.source_column

    yields_text = False

    def mysql_sql(self, col: str, literal) -> str:
        """The rewrite in the upstream's SQL (the full load's text path): a value it cannot
        take becomes NULL there, so the load first looks for one (``text_rows.partition_id_violation``)."""
        return f"IF({col} >= 0 AND {col} < {1 << int(self.id_bits)}, {col} | {int(self.or_value)}, NULL)"

    def spark_sql(self, col: str, is_string: bool, where: str) -> str:
        """The same rewrite as ``TableMapping.map_row`` in Spark SQL over the column ``col``
        (quoted): NULL stays NULL, a value that is no integer or out of range fails the job."""
        n = f"try_cast({col} AS BIGINT)"
        bad = _spark_str(f"column mapping ({PARTITION_ID}) of {where}: a value is not an integer in "
                         f"[0, 2**{self.id_bits})")
        out = f"({n} | {self.or_value})"
        return (f"CASE WHEN {col} IS NULL THEN NULL WHEN {n} IS NULL OR {n} < 0 OR {n} >= {1 << self.id_bits} "
                f"THEN raise_error({bad}) ELSE {f'CAST({out} AS STRING)' if is_string else out} END")


@dataclass(frozen=True)
class AddPrefix:
    column: str
    index: int
    prefix: str

    @property
    def reads(self) -> str:
        return self.column

    yields_text = True

    def mysql_sql(self, col: str, literal) -> str:
        return f"CONCAT({literal(self.prefix)}, CONVERT({col} USING utf8mb4))"

    def spark_sql(self, col: str, is_string: bool, where: str) -> str:
        return _affix_sql(col, is_string, where, ADD_PREFIX, f"concat({_spark_str(self.prefix)}, {col})")


@dataclass(frozen=True)
class AddSuffix:
    column: str
    index: int
    suffix: str

    @property
    def reads(self) -> str:
        return self.column

    yields_text = True

    def mysql_sql(self, col: str, literal) -> str:
        return f"CONCAT(CONVERT({col} USING utf8mb4), {literal(self.suffix)})"

    def spark_sql(self, col: str, is_string: bool, where: str) -> str:
        return _affix_sql(col, is_string, where, ADD_SUFFIX, f"concat({col}, {_spark_str(self.suffix)})")


def _spark_str(text: str) -> str:
    """A Spark SQL string literal (backslash escapes are on by default)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _affix_sql(col: str, is_string: bool, where: str, kind: str, concat: str) -> str:
    if is_string:
        return f"CASE WHEN {col} IS NULL THEN NULL ELSE {concat} END"
    # map_row refuses a non-string value; so does the job, on the first row that has one
    bad = _spark_str(f"column mapping ({kind}) of {where}: a value is not a string (map a string column, as DM requires)")
    return f"CASE WHEN {col} IS NULL THEN NULL ELSE raise_error({bad}) END"


ColumnTransform = Union[PartitionId, AddPrefix, AddSuffix]


def _fail(where: str, msg: str, fix: str):
    return ErrorCode.CONFIG_INVALID.error(f"column mapping {where}: {msg}", workaround=fix)


def _suffix(name: str, prefix: str, sep: str, bits: int, what: str, case_sensitive: bool) -> int:
    n, p = (name, prefix + sep) if case_sensitive else (name.lower(), (prefix + sep).lower())
    if n == (prefix if case_sensitive else prefix.lower()):
        return 0
    digits = n[len(p):] if n.startswith(p) else None
    if not digits or not (digits.isascii() and digits.isdigit()):
        raise _fail(f"({PARTITION_ID})", f"{what} {name!r} is not {p!r} followed by a number",
                    "Fix the rule's prefix arguments or its schema-pattern/table-pattern.")
    value = int(digits)
    if value >= 1 << bits:
        raise _fail(f"({PARTITION_ID})", f"{what} suffix {value} of {name!r} does not fit in {bits} bits (max {(1 << bits) - 1})",
                    "Number the shards below the limit, or drop that field with an empty argument.")
    return value


def partition_or_value(args: list[str], schema: str, table: str, case_sensitive: bool = False) -> int:
    """The high bits ``partition id`` ORs into every id of ``schema``.``table``.

    >>> partition_or_value(["", "", "t", "_"], "s", "t_5") == 5 << 55
    True
    >>> partition_or_value(["3", "s", ""], "s", "t_5") == 3 << 59      # name == prefix: suffix 0
    True
    """
    sep = args[3] if len(args) > 3 else ""
    shift, value = 64 - SIGN_BITS, 0
    if args[0]:
        inst = _instance_id(args[0])
        shift -= INSTANCE_BITS
        value |= inst << shift
    if args[1]:
        shift -= SCHEMA_BITS
        value |= _suffix(schema, args[1], sep, SCHEMA_BITS, "schema", case_sensitive) << shift
    if args[2]:
        shift -= TABLE_BITS
        value |= _suffix(table, args[2], sep, TABLE_BITS, "table", case_sensitive) << shift
    return value


def _instance_id(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) >= 1 << INSTANCE_BITS:
        raise RuleError("arguments[0]", f"instance id must be an integer in [0, {1 << INSTANCE_BITS}), not {text!r}")
    return int(text)


def _validate(rule: ColumnMappingRule) -> None:
    if rule.expression not in EXPRESSIONS:
        raise RuleError("expression", f"must be one of {sorted(EXPRESSIONS)}, not {rule.expression!r}")
    if not rule.target_column:
        raise RuleError("target-column", "must not be empty")
    if rule.expression == PARTITION_ID:
        if len(rule.arguments) not in (3, 4):
            raise RuleError("arguments", "partition id takes [instance id, schema prefix, table prefix, separator?]")
        if rule.arguments[0]:
            _instance_id(rule.arguments[0])
    elif len(rule.arguments) != 1:
        raise RuleError("arguments", f"{rule.expression} takes exactly one argument")


def _partition_id(rule, schema, table, cols, cs) -> PartitionId:
    source = rule.source_column or rule.target_column
    return PartitionId(rule.target_column, cols[rule.target_column.lower()], partition_or_value(rule.arguments, schema, table, cs),
                       ID_BITS, source, cols[source.lower()])


EXPRESSIONS: dict[str, Callable[..., ColumnTransform]] = {
    PARTITION_ID: _partition_id,
    ADD_PREFIX: lambda rule, s, t, cols, cs: AddPrefix(rule.target_column, cols[rule.target_column.lower()], rule.arguments[0]),
    ADD_SUFFIX: lambda rule, s, t, cols, cs: AddSuffix(rule.target_column, cols[rule.target_column.lower()], rule.arguments[0]),
}


@dataclass(frozen=True)
class TableMapping:
    """The column rewrite of one upstream table (for one column list)."""

    schema: str
    table: str
    transforms: list[ColumnTransform]

    def map_row(self, row: list) -> list:
        """A copy of ``row`` (values in column order) with the transforms applied."""
        out = list(row)
        for t in self.transforms:
            if isinstance(t, PartitionId):
                out[t.index] = self._partition(t, out[t.source_index])
            else:
                v = out[t.index]
                if v is not None:
                    if not isinstance(v, str):
                        raise self._err(t, f"value {v!r} is not a string", "Map a string column, as DM requires.")
                    out[t.index] = t.prefix + v if isinstance(t, AddPrefix) else v + t.suffix
        return out

    def _partition(self, t: PartitionId, v):
        if v is None:
            return None
        as_text = isinstance(v, str)
        try:
            n = int(v.strip()) if as_text else int(v) if isinstance(v, (int, Decimal)) and v == int(v) else None
        except ValueError:
            n = None
        if n is None or isinstance(v, bool):
            raise self._err(t, f"value {v!r} is not an integer", "Partition id only applies to integer columns.")
        if not 0 <= n < 1 << t.id_bits:
            raise self._err(t, f"value {n} is out of range [0, 2**{t.id_bits})",
                            f"Change the column-mapping rule (or the data): partition id only fits ids in [0, 2**{t.id_bits}).")
        n |= t.or_value
        return str(n) if as_text else n

    def _err(self, t, msg, fix):
        kind = {PartitionId: PARTITION_ID, AddPrefix: ADD_PREFIX, AddSuffix: ADD_SUFFIX}[type(t)]
        col = t.source_column if isinstance(t, PartitionId) else t.column
        return _fail(f"({kind}) of `{self.schema}`.`{self.table}`.`{col}`", msg, fix)


class ColumnMapper:
    """The compiled column-mapping rules of one instance."""

    def __init__(self, rules: list[ColumnMappingRule], case_sensitive: bool = False):
        for r in rules:
            _validate(r)
        self._cs = case_sensitive
        self.rules = tuple(rules)   # as the task file gives them: two mappers differ when these do
        self._sel = Selector([(r.schema_pattern, r.table_pattern, r) for r in rules], case_sensitive)
        self._cache: dict[tuple, TableMapping | None] = {}

    def plan(self, schema: str, table: str, columns: list[str]) -> TableMapping | None:
        """How to rewrite rows of ``schema``.``table`` with these columns; None: leave them."""
        key = (schema, table, tuple(columns))
        if key not in self._cache:
            self._cache[key] = self._plan(schema, table, columns)
        return self._cache[key]

    def _plan(self, schema, table, columns) -> TableMapping | None:
        tables, schemas = self._sel.match(schema, table)
        level, found = ("table", tables) if table and tables else ("schema", schemas)
        if not found:
            return None
        if len(found) > 1:
            raise _fail("rules", f"`{schema}`.`{table}` matches {len(found)} {level}-level rules, DM allows one",
                        "Make the column-mappings' schema-pattern/table-pattern disjoint.")
        rule = found[0]
        cols = {c.lower(): i for i, c in reversed(list(enumerate(columns)))}
        for key, name in (("source-column", rule.source_column), ("target-column", rule.target_column)):
            if name and name.lower() not in cols:
                raise _fail(f"({rule.expression})", f"`{schema}`.`{table}` has no column `{name}` ({key})",
                            "Fix the rule's columns or its schema-pattern/table-pattern.")
        real = {k: columns[i] for k, i in cols.items()}
        t = EXPRESSIONS[rule.expression](rule, schema, table, cols, self._cs)
        t = _with_real_names(t, real)
        return TableMapping(schema, table, [t])


def _with_real_names(t: ColumnTransform, real: dict[str, str]) -> ColumnTransform:
    if isinstance(t, PartitionId):
        return replace(t, column=real[t.column.lower()], source_column=real[t.source_column.lower()])
    return replace(t, column=real[t.column.lower()])
