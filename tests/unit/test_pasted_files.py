"""Files pasted into the operations DAGs' forms: a readable password is refused, naming the field."""

import pytest

from dm_core.cli import pasted
from dm_core.errors import ShardflowError
from dm_core.secrets import dm_cipher

KEY = bytes(range(32))
LEGACY = "/Q7B9DizNLLTTfiZHv9WoEAKamfpIUs="   # DM's integration tests' '123456' under DM's former built-in key


@pytest.fixture
def key_file(tmp_path, monkeypatch):
    f = tmp_path / "secret.key"
    f.write_text(KEY.hex())
    monkeypatch.setenv(dm_cipher.KEY_PATH_ENV, str(f))


def _source(password: str) -> str:
    return f"source-id: s1\nfrom:\n  host: h\n  port: 3306\n  user: u\n  password: {password!r}\n"


def _task(password: str) -> str:
    return (f"name: t\ntask-mode: all\ntarget-database: {{host: h, port: 4000, user: u, password: {password!r}}}\n"
            "mysql-instances: [{source-id: s1}]\n")


CASES = [  # (what, password, connection, refused with)
    ("plain", "hunter2", "", "from.password is in the clear"),
    ("env reference", "${SRC_PW}", "", None),
    ("empty, from a Connection", "", "src_conn", None),
    ("both given", "${SRC_PW}", "src_conn", "password_connection names 'src_conn' too"),
    ("DM's former built-in key", LEGACY, "", "from.password is in the clear"),
]


@pytest.mark.parametrize("what, password, connection, refused", CASES, ids=[c[0] for c in CASES])
def test_pasted_source(what, password, connection, refused, key_file):
    if refused is None:
        assert pasted.check_source(_source(password), connection=connection)["source-id"] == "s1"
    else:
        with pytest.raises(ShardflowError) as e:
            pasted.check_source(_source(password), connection=connection)
        assert refused in str(e.value) and (not password or password not in str(e.value))


def test_pasted_task_accepts_the_workers_key_and_refuses_the_clear(key_file):
    assert pasted.check_task(_task(dm_cipher.encrypt("s3cret", KEY)))["name"] == "t"
    assert pasted.check_task(_task("${TIDB_PW}"))["name"] == "t"
    with pytest.raises(ShardflowError) as e:
        pasted.check_task(_task("s3cret"))
    assert "target-database.password" in str(e.value) and "s3cret" not in str(e.value)
    assert "delete this DAG run" in str(e.value)


def test_without_a_key_file_a_ciphertext_counts_as_readable(monkeypatch):
    monkeypatch.delenv(dm_cipher.KEY_PATH_ENV, raising=False)
    assert pasted.plain_password(dm_cipher.encrypt("s3cret", KEY))


@pytest.mark.parametrize("text, says", [("", "empty or not a mapping"), ("a: [", "not YAML"), ("- 1", "not a mapping")])
def test_pasted_text_that_is_not_a_file(text, says):
    with pytest.raises(ShardflowError, match=says):
        pasted.check_task(text)
