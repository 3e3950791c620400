"""Target CREATE TABLE from the upstream's SHOW CREATE TABLE (dm_core.full.target_schema):
what is kept byte for byte, what is edited (name, partition-id width, extract columns in
unique keys, foreign keys' parents), and which merged groups are refused."""


import pytest

from dm_core.errors import ShardflowError
from dm_core.full.discover import SourceTable
from dm_core.full.target_schema import create_table_sql, parse_show_create, pick_definition

SHOW = """CREATE TABLE `t_1` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(64) CHARACTER SET latin1 COLLATE latin1_bin DEFAULT 'it''s, (x)' COMMENT 'a, b',
  `doc` text DEFAULT NULL,
  `n2` int(11) GENERATED ALWAYS AS (`id` * 2) VIRTUAL,
  `j` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`j`)),
  `pid` int(11) DEFAULT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uk` (`name`(10),`n2`) USING BTREE,
  KEY `k` (`name`(4)),
  FULLTEXT KEY `ft` (`doc`),
  CONSTRAINT `fk` FOREIGN KEY (`pid`) REFERENCES `parent` (`id`) ON DELETE CASCADE,
  CONSTRAINT `chk` CHECK (`id` > 0)
) ENGINE=InnoDB AUTO_INCREMENT=42 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci COMMENT='tbl, ok'
 PARTITION BY KEY (`id`)
PARTITIONS 2"""


def member(sid="s1", schema="db_1", table="t_1", extract=None):
    return SourceTable(sid, schema, table, "merged", "t", ["id"], ["id"], ["int"], extract=extract or {})


def route(schema, table):
    return ("merged", "t" if table.startswith("t_") else table)


def test_everything_kept_but_the_name():
    sql = create_table_sql(parse_show_create(SHOW), member(), set(), route)
    body = SHOW.split("(", 1)[1]
    assert sql.startswith("CREATE TABLE IF NOT EXISTS `merged`.`t` (\n")
    # every line is the upstream's, apart from the routed foreign key parent
    assert sql.split("(", 1)[1] == body.replace("REFERENCES `parent`", "REFERENCES `merged`.`parent`")


def test_partition_id_column_widened_keeping_its_attributes():
    sql = create_table_sql(parse_show_create(SHOW), member(), {"id"}, route)
    assert "  `id` bigint NOT NULL AUTO_INCREMENT,\n" in sql


def test_extract_columns_appended_and_joined_to_unique_keys():
    sql = create_table_sql(parse_show_create(SHOW), member(extract={"c_table": "t_1", "c_schema": "db_1"}), set(), route)
    assert "`pid` int(11) DEFAULT NULL,\n  `c_table` varchar(255) NOT NULL DEFAULT '',\n  `c_schema` varchar(255)" in sql
    assert "PRIMARY KEY (`id`,`c_table`,`c_schema`)" in sql
    assert "UNIQUE KEY `uk` (`name`(10),`n2`,`c_table`,`c_schema`) USING BTREE" in sql
    assert "KEY `k` (`name`(4))," in sql  # non-unique keys unchanged


SIMPLE = "CREATE TABLE `{name}` (\n  `id` int(11) NOT NULL,\n{extra}  PRIMARY KEY (`id`)\n) ENGINE=InnoDB AUTO_INCREMENT={ai}"


def parsed(extra="", ai=1, table="t_1", sid="s1"):
    return member(sid=sid, table=table), parse_show_create(SIMPLE.format(name=table, extra=extra, ai=ai))


def test_equal_members_differ_only_in_name_and_counter():
    a, b = parsed(ai=5), parsed(ai=900, table="t_2", sid="s2")
    assert pick_definition([a, b], exact=True) is a


# (members' extra column lines, exact, chosen index or the error's words)
GROUPS = [
    (["", "  `note` int(11) DEFAULT NULL,\n"], False, 1),                   # a superset member is used
    (["  `note` int(11) DEFAULT NULL,\n", ""], False, 0),
    (["", "  `note` int(11) DEFAULT NULL,\n"], True,
     "column `note` is in `db_1`.`t_2` (s2) but not in `db_1`.`t_1` (s1)"),
    (["  `a` int(11) DEFAULT NULL,\n", "  `b` int(11) DEFAULT NULL,\n"], False,
     "no shard table has every other shard table's columns and keys; column `a` is in `db_1`.`t_1` (s1) but not in"),
    (["  `a` int(11) DEFAULT NULL,\n", "  `a` bigint(20) DEFAULT NULL,\n"], False,
     "column `a` is int(11) DEFAULT NULL in `db_1`.`t_1` (s1) but bigint(20) DEFAULT NULL in `db_1`.`t_2` (s2)"),
]


@pytest.mark.parametrize("extras, exact, want", GROUPS)
def test_merged_groups(extras, exact, want):
    members = [parsed(extra=x, table=f"t_{i + 1}", sid=f"s{i + 1}") for i, x in enumerate(extras)]
    if isinstance(want, int):
        assert pick_definition(members, exact=exact) is members[want]
        return
    with pytest.raises(ShardflowError) as e:
        pick_definition(members, exact=exact)
    assert want in str(e.value)
    assert "cannot create merged target `merged`.`t`" in str(e.value)
