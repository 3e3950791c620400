"""Passwords as DM users have them (``dmctl encrypt`` output in task and source files), and the
state store's sealing key (Fernet key file, rotation)."""

import base64
import io
import os
import stat
import subprocess

import pytest

from dm_core.cli.dmctl import main as dmctl
from dm_core.config.source import parse_source
from dm_core.config.task import parse_task
from dm_core.errors import ErrorCode, ShardflowError
from dm_core.secrets import dm_cipher, state_key

# The password of DM's integration tests ("123456") as their files held it before DM removed its
# built-in key (e.g. dm/tests/all_mode/conf/source1.yaml, dmctl_command/conf/source1-encrypted-pass.yaml).
DM_OLD_CIPHERTEXT = "/Q7B9DizNLLTTfiZHv9WoEAKamfpIUs="
# dm/tests/dmctl_basic/conf/key.txt: a key file as DM-master's secret-key-path reads it
DM_TEST_KEY_HEX = "1" * 64


@pytest.fixture
def key_file(tmp_path, monkeypatch):
    p = tmp_path / "key.txt"
    p.write_text(DM_TEST_KEY_HEX + "\n")
    monkeypatch.setenv(dm_cipher.KEY_PATH_ENV, str(p))
    return p


@pytest.fixture(autouse=True)
def _no_keys_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(dm_cipher.KEY_PATH_ENV, raising=False)
    monkeypatch.setenv(state_key.KEY_FILE_ENV, str(tmp_path / "state.key"))


# ---- DM's format --------------------------------------------------------------------------
def test_ciphertext_of_old_dm_releases_decrypts_with_the_former_built_in_key():
    assert dm_cipher.decrypt(DM_OLD_CIPHERTEXT) == "123456"
    assert dm_cipher.reveal(DM_OLD_CIPHERTEXT) == "123456"


def test_format_is_aes_256_cfb_as_openssl_reads_it(key_file):
    """An independent oracle: openssl's aes-256-cfb (CFB-128, as Go's NewCFBEncrypter) decrypts ours."""
    ct = dm_cipher.encrypt("pässwörd with spaces")
    raw = base64.b64decode(ct)
    iv, sep, body = raw[:16], raw[16:17], raw[17:]
    assert sep == b"@" and len(body) == len("pässwörd with spaces".encode())
    out = subprocess.run(["openssl", "enc", "-d", "-aes-256-cfb", "-K", DM_TEST_KEY_HEX, "-iv", iv.hex()],
                         input=body, capture_output=True, check=True).stdout
    assert out.decode() == "pässwörd with spaces"
    assert dm_cipher.decrypt(ct) == "pässwörd with spaces"


def test_openssl_ciphertext_in_dm_format_decrypts(key_file):
    iv = os.urandom(16)
    body = subprocess.run(["openssl", "enc", "-aes-256-cfb", "-K", DM_TEST_KEY_HEX, "-iv", iv.hex()],
                          input=b"from-openssl", capture_output=True, check=True).stdout
    assert dm_cipher.reveal(base64.b64encode(iv + b"@" + body).decode()) == "from-openssl"


@pytest.mark.parametrize("value", ["123456", "plain-password", "YWJj", "", "a" * 40, "p@ss/word+=="])
def test_anything_that_is_not_a_ciphertext_is_the_password_itself(value, key_file):
    assert dm_cipher.reveal(value) == value


def test_configured_key_and_old_ciphertexts_both_work(key_file):
    mine = dm_cipher.encrypt("new-secret")
    assert dm_cipher.reveal(mine) == "new-secret"
    assert dm_cipher.reveal(DM_OLD_CIPHERTEXT) == "123456"      # the configured key gives garbage: next key


def test_ciphertext_under_an_unknown_key_is_taken_as_written(tmp_path):
    other = dm_cipher.encrypt("whatever", bytes(32))
    assert dm_cipher.reveal(other) == other                     # DM's DecryptOrPlaintext


@pytest.mark.parametrize("content,why", [("zz" * 32, "not hexadecimal"), ("ab" * 16, "holds 16 bytes")])
def test_bad_key_file_names_the_file(tmp_path, monkeypatch, content, why):
    p = tmp_path / "bad.key"
    p.write_text(content)
    monkeypatch.setenv(dm_cipher.KEY_PATH_ENV, str(p))
    with pytest.raises(ShardflowError) as e:
        dm_cipher.encrypt("x")
    assert e.value.code is ErrorCode.SECRET_KEY_INVALID and str(p) in e.value.message and why in e.value.message


def test_encrypted_passwords_in_source_and_task_files_are_decrypted(key_file):
    src = parse_source(f"source-id: s\nfrom: {{host: h, port: 3306, user: u, password: '{DM_OLD_CIPHERTEXT}'}}\n")
    assert src.password == "123456"
    mine = dm_cipher.encrypt("target-pw")
    t = parse_task(f"name: t\ntask-mode: all\ntarget-database: {{host: h, port: 4000, user: u, password: '{mine}'}}\n"
                   "mysql-instances: [{source-id: s}]\n")
    assert t.target_database.password == "target-pw"


def test_an_unreadable_key_file_is_a_problem_naming_the_password_key(tmp_path, monkeypatch):
    from dm_core.config.problems import SourceConfigError

    monkeypatch.setenv(dm_cipher.KEY_PATH_ENV, str(tmp_path / "missing.key"))
    with pytest.raises(SourceConfigError) as e:
        parse_source(f"source-id: s\nfrom: {{host: h, port: 3306, user: u, password: '{DM_OLD_CIPHERTEXT}'}}\n")
    assert [p.key for p in e.value.problems] == ["from.password"]
    assert DM_OLD_CIPHERTEXT not in str(e.value)


# ---- dmctl encrypt / decrypt ----------------------------------------------------------------
def test_dmctl_encrypt_needs_a_key_as_dm_does(capsys):
    assert dmctl(["encrypt", "abc"]) == 1
    err = capsys.readouterr().err
    assert "SHARDFLOW_SECRET_KEY_PATH" in err and "abc" not in err


def test_dmctl_encrypt_then_decrypt_with_a_key_file(tmp_path, capsys):
    p = tmp_path / "k"
    p.write_text(DM_TEST_KEY_HEX)
    assert dmctl(["encrypt", "abc", "--secret-key-path", str(p)]) == 0
    ct = capsys.readouterr().out.strip()
    assert ct != "abc" and dm_cipher.decrypt(ct, bytes.fromhex(DM_TEST_KEY_HEX)) == "abc"
    assert dmctl(["decrypt", ct, "--secret-key-path", str(p)]) == 0
    assert capsys.readouterr().out.strip() == "abc"


def test_dmctl_decrypt_reads_old_dm_output_and_stdin(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(DM_OLD_CIPHERTEXT + "\n"))
    assert dmctl(["decrypt", "-"]) == 0
    assert capsys.readouterr().out.strip() == "123456"


def test_dmctl_decrypt_of_a_non_ciphertext_says_so(capsys):
    assert dmctl(["decrypt", "plain"]) == 1
    assert "not a DM ciphertext" in capsys.readouterr().err


# ---- the state store's key ------------------------------------------------------------------
def test_seal_needs_the_named_key_file_to_exist(tmp_path):
    with pytest.raises(ShardflowError) as e:
        state_key.seal("pw")
    assert e.value.code is ErrorCode.STATE_KEY_INVALID and "state.key" in e.value.message


def test_local_stack_key_file_is_created_private_on_first_use(tmp_path, monkeypatch):
    monkeypatch.delenv(state_key.KEY_FILE_ENV)
    monkeypatch.setenv("SHARDFLOW_STACK_DIR", str(tmp_path / "stack"))
    sealed = state_key.seal("pw")
    path = tmp_path / "stack" / "state.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert state_key.unseal(sealed) == "pw"


def test_rotation_keeps_old_secrets_readable_and_reseals_with_the_new_key(tmp_path):
    path = tmp_path / "state.key"
    old = state_key.generate_key()
    path.write_text(old + "\n")
    sealed_old = state_key.seal("pw")
    new = state_key.generate_key()
    path.write_text(f"# rotated\n{new}\n{old}\n")
    assert state_key.unseal(sealed_old) == "pw"
    resealed = state_key.reseal(sealed_old)
    assert resealed != sealed_old and state_key.reseal("legacy-plain").startswith(state_key.PREFIX)
    path.write_text(new + "\n")     # the old key removed: what was resealed still opens
    assert state_key.unseal(resealed) == "pw"
    with pytest.raises(ShardflowError) as e:
        state_key.unseal(sealed_old)
    assert e.value.code is ErrorCode.STATE_KEY_INVALID and "pw" not in str(e.value)


def test_a_key_file_without_keys_is_an_error(tmp_path):
    (tmp_path / "state.key").write_text("# nothing here\n")
    with pytest.raises(ShardflowError) as e:
        state_key.seal("pw")
    assert "holds no key" in e.value.message
