"""DM's event type of an ALTER TABLE (dm/syncer/ddl.go AstToDDLEvent, handleModifyColumn and TiDB's
needChangeColumnData), table-driven: (statement, event) against one table before it; then the overlay
of DDLs the downstream did not get."""

import pytest

from dm_core.ddl.incompatible import Overlay, TableDef, alter_event, col

TABLE = TableDef(
    {"id": col("id", "int(11)", auto_increment=True),
     "ti": col("ti", "tinyint(4)"), "si": col("si", "smallint(6)"), "mi": col("mi", "mediumint(7)"),
     "i": col("i", "int(8)", default="1"), "bi": col("bi", "bigint(20) unsigned"),
     "d": col("d", "decimal(7,2)"), "f": col("f", "float"),
     "ch": col("ch", "char(4)", charset="utf8mb4", collation="utf8mb4_general_ci"),
     "vc": col("vc", "varchar(255)", charset="utf8mb4", collation="utf8mb4_general_ci"),
     "bn": col("bn", "binary(2)"), "tt": col("tt", "tinytext", charset="utf8mb4", collation="utf8mb4_general_ci"),
     "e": col("e", "enum('a','b','c')", charset="utf8mb4", collation="utf8mb4_general_ci"),
     "dt": col("dt", "datetime(3)"), "j": col("j", "json"), "u": col("u", "int(11)")},
    {"primary": ("primary", ("id",)), "u": ("unique", ("u",)), "multi": ("unique", ("i", "si"))},
    "utf8mb4", "utf8mb4_general_ci")

CASES = [
    # type changes (TiDB's needChangeColumnData)
    ("MODIFY mi smallint(6)", "value range decrease"),
    ("MODIFY mi int", "alter table"),
    ("MODIFY mi mediumint(3)", "alter table"),                 # an integer's display width is no range
    ("MODIFY mi mediumint unsigned", "precision decrease"),    # sign of an integer
    ("MODIFY d decimal(7,1)", "precision decrease"),
    ("MODIFY d decimal(9,2)", "precision decrease"),           # any DECIMAL change
    ("MODIFY d decimal(7,2)", "alter table"),
    ("MODIFY e enum('a','b','c','d')", "alter table"),          # values appended
    ("MODIFY e enum('a','c')", "value range decrease"),
    ("MODIFY vc varchar(10)", "value range decrease"),
    ("MODIFY vc varchar(300)", "alter table"),
    ("MODIFY vc char(255)", "modify column"),                  # VARCHAR -> CHAR
    ("MODIFY vc text", "alter table"),
    ("MODIFY tt varchar(10)", "modify column"),                # another string type, shorter
    ("MODIFY bn binary(3)", "precision decrease"),
    ("MODIFY ch char(8)", "alter table"),
    ("MODIFY dt datetime(1)", "value range decrease"),
    ("MODIFY mi varchar(10)", "modify column"),
    ("MODIFY vc int", "modify column"),
    ("MODIFY f double", "modify column"),
    ("MODIFY j json", "alter table"),
    # then DM's checks, in order
    ("CHANGE id id int(11)", "remove auto increment"),
    ("CHANGE id id int(11) AUTO_INCREMENT", "drop primary key"),
    ("CHANGE id id int(11) AUTO_INCREMENT PRIMARY KEY", "alter table"),
    ("MODIFY u int(11)", "drop unique key"),
    ("MODIFY u int(11) UNIQUE", "alter table"),
    ("MODIFY i int(8)", "modify default value"),
    ("MODIFY i int DEFAULT 1", "alter table"),                 # in a multi-column key only: no unique flag
    ("MODIFY ch char(4) CHARACTER SET latin1", "modify charset"),
    ("MODIFY ch char(4) COLLATE utf8mb4_unicode_ci", "modify collation"),
    ("MODIFY si smallint(6) AFTER j", "modify columns order"),
    ("MODIFY si smallint(6) FIRST", "modify columns order"),
    ("CHANGE si si2 smallint(6)", "rename column"),
    ("CHANGE nope nope2 int", "alter table"),                  # a column the table does not have
    # other clauses
    ("RENAME COLUMN si TO si2", "rename column"),
    ("RENAME INDEX u TO u2", "rename index"),
    ("RENAME TO t2", "rename table"),
    ("DROP COLUMN j", "drop column"),
    ("DROP INDEX u", "drop index"),
    ("DROP PRIMARY KEY", "drop primary key"),
    ("ALTER COLUMN i SET DEFAULT 2", "modify default value"),
    ("ALTER COLUMN i DROP DEFAULT", "modify default value"),
    ("ADD INDEX ix (si)", "modify constraint"),
    ("ADD CONSTRAINT uq UNIQUE (si)", "modify constraint"),
    ("ADD FOREIGN KEY (si) REFERENCES p (id)", "modify constraint"),
    ("ENGINE = MyISAM", "modify storage engine"),
    ("DEFAULT CHARSET = latin1", "modify charset"),
    ("CONVERT TO CHARACTER SET latin1", "modify charset"),
    ("COLLATE = utf8mb4_bin", "modify collation"),
    ("COMMENT = 'x'", "alter table"),
    ("ADD COLUMN z int", "alter table"),
    ("ADD COLUMN z int, DROP COLUMN j", "drop column"),         # the first clause that is one decides
    ("DROP FOREIGN KEY fk, ADD COLUMN z int", "alter table"),
    ("REORGANIZE PARTITION p0 INTO (PARTITION n0 VALUES LESS THAN (5))", "reorganize table partition"),
    ("TRUNCATE PARTITION n0", "truncate table partition"),
    ("REBUILD PARTITION n0, n1", "rebuild table partition"),
    ("COALESCE PARTITION 2", "coalesce table partition"),
    ("EXCHANGE PARTITION p0 WITH TABLE t2", "exchange table partition"),
    ("DROP PARTITION p0", "drop table partition"),
    ("ADD PARTITION (PARTITION p9 VALUES LESS THAN (9))", "alter table"),
    ("PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10))", "alter table"),
]


@pytest.mark.parametrize("clause,event", CASES)
def test_event(clause, event):
    assert alter_event(f"ALTER TABLE t {clause}", TABLE,
                       default_collation=lambda cs: f"{cs}_general_ci" if cs != "latin1" else "latin1_swedish_ci",
                       charset_of=lambda coll: coll.split("_")[0]) == event


def test_without_the_table_a_modify_is_alter_table():
    assert alter_event("ALTER TABLE t MODIFY mi smallint", None) == "alter table"


def test_skipped_changes_are_judged_against():
    """DM's tracker reads skipped DDL: DECIMAL(7,1) skipped makes DECIMAL(7,2) a change again;
    a column renamed by a skipped CHANGE is found under its new name; a skipped DROP COLUMN
    leaves the column gone; a DDL that runs hands its column back to the downstream."""
    ov = Overlay()
    ov.skipped("ALTER TABLE t MODIFY d decimal(7,1)", TABLE)
    assert alter_event("ALTER TABLE t MODIFY d decimal(7,2)", ov.apply(TABLE)) == "precision decrease"
    ov.skipped("ALTER TABLE t CHANGE si si_new smallint(6)", ov.apply(TABLE))
    assert alter_event("ALTER TABLE t CHANGE si_new si smallint(6)", ov.apply(TABLE)) == "rename column"
    ov.skipped("ALTER TABLE t DROP COLUMN j", ov.apply(TABLE))
    assert "j" not in ov.apply(TABLE).columns
    ov.executed("ALTER TABLE `t` ADD COLUMN `j` json")
    assert "j" in ov.apply(TABLE).columns
    ov.skipped("ALTER TABLE t ADD CONSTRAINT i_unique UNIQUE (i)", ov.apply(TABLE))
    assert alter_event("ALTER TABLE t MODIFY i int DEFAULT 1", ov.apply(TABLE)) == "drop unique key"
    again = Overlay.from_dict(ov.to_dict())
    assert again.apply(TABLE) == ov.apply(TABLE)
