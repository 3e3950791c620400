"""DM files pasted into a form (the Airflow UI's operations DAGs) instead of given as files.

A DAG run's conf is stored in Airflow's database and shown on the run's page to everyone who
can see the DAG, so a pasted file must not carry a password in the clear. What may stand in a
``password`` field of pasted text:

- ``${ENV_VAR}``: expanded where the file is used (the Airflow workers' environment), as in
  any task or source file;
- a ``dmctl encrypt`` ciphertext that the configured key (``SHARDFLOW_SECRET_KEY_PATH``)
  decrypts: the key stays on the workers. DM's former built-in key does not count: every DM
  binary ships it, so such a value is the password for anyone who reads the conf;
- nothing, when the form names an Airflow Connection that holds the password (sources).

    >>> plain_password("${TIDB_PASSWORD}"), plain_password(""), plain_password("hunter2")
    (False, False, True)
"""

from __future__ import annotations

import re

import yaml

from dm_core.errors import ErrorCode

_ENV_ONLY = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
_FIX = ("write ${ENV_VAR} (set on the Airflow workers) or the output of `dmctl encrypt` with the "
        "workers' SHARDFLOW_SECRET_KEY_PATH key; then delete this DAG run (Browse > DAG Runs) "
        "so the text you pasted is gone from Airflow's database")


def plain_password(value) -> bool:
    """True when ``value`` is a password anyone reading the text can use."""
    if value is None or str(value) == "" or _ENV_ONLY.match(str(value)):
        return False
    from dm_core.secrets import dm_cipher

    key = dm_cipher.load_key()
    if key is None:
        return True
    try:
        dm_cipher.decrypt(str(value), key)
        return False
    except ValueError:      # NotCiphertext too: not DM's format, or not this key's
        return True


def _doc(text: str, what: str) -> dict:
    try:
        doc = yaml.safe_load(text or "")
    except yaml.YAMLError as e:
        raise ErrorCode.CONFIG_INVALID.error(f"the pasted {what} is not YAML: {e}") from None
    if not isinstance(doc, dict):
        raise ErrorCode.CONFIG_INVALID.error(f"the pasted {what} is empty or not a mapping of keys; paste the whole "
                                             f"file")
    return doc


def check_source(text: str, *, connection: str = "") -> dict:
    """The pasted source.yaml as a dict, refused if ``from.password`` is readable."""
    doc = _doc(text, "source file")
    frm = doc.get("from") if isinstance(doc.get("from"), dict) else {}
    if plain_password(frm.get("password")):
        raise ErrorCode.CONFIG_INVALID.error(
            "source file: from.password is in the clear in the DAG run's conf, which Airflow shows on the run's page",
            workaround="leave it empty and name an Airflow Connection holding it (Param password_connection), or "
                       + _FIX)
    if connection and frm.get("password"):
        raise ErrorCode.CONFIG_INVALID.error(
            f"source file: from.password is set and password_connection names {connection!r} too",
            workaround="keep one: empty from.password to take the Connection's")
    return doc


def check_task(text: str) -> dict:
    """The pasted task file as a dict, refused if a password in it is readable."""
    doc = _doc(text, "task file")
    target = doc.get("target-database") if isinstance(doc.get("target-database"), dict) else {}
    if plain_password(target.get("password")):
        raise ErrorCode.CONFIG_INVALID.error(
            "task file: target-database.password is in the clear in the DAG run's conf, which Airflow shows on the "
            "run's page", workaround=_FIX)
    return doc
