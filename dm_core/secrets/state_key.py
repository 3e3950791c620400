"""Sealing the secrets shardflow keeps in its state store (Fernet, from a key file).

The key file is named by ``SHARDFLOW_STATE_KEY_FILE``: one Fernet key per line (``#`` lines
and blank lines ignored). The first key seals; every key unseals, so a key can be rotated
without downtime:

1. put a new key on the first line, keep the old one below it (every process reads the file
   again when it changes);
2. ``dmctl rotate-state-key`` re-seals every stored secret with the first key;
3. remove the old line.

Without ``SHARDFLOW_STATE_KEY_FILE`` the local stack's file is used
(``$SHARDFLOW_STACK_DIR/state.key``, else ``.stack/state.key`` in the project), created with a
new key (mode 0600) the first time something is sealed, so ``make stack-up`` needs no manual
step. A key file named explicitly is never created: a missing mount must not silently start
a second key.

Sealed values are ``fernet:<token>``. Anything else is a value written before sealing existed
and is returned as is (and sealed on its next write, or by ``rotate-state-key``).

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); os.environ[KEY_FILE_ENV] = os.path.join(d, "k")
    >>> _ = open(os.environ[KEY_FILE_ENV], "w").write(generate_key() + "\\n")
    >>> # "!" is outside a token's alphabet, so finding it there would be a leak, not chance
    >>> s = seal("pw!"); s.startswith("fernet:"), "pw!" in s, unseal(s), unseal("legacy-plain")
    (True, False, 'pw!', 'legacy-plain')
    >>> del os.environ[KEY_FILE_ENV]
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from dm_core.errors import ErrorCode

KEY_FILE_ENV = "SHARDFLOW_STATE_KEY_FILE"
PREFIX = "fernet:"
log = logging.getLogger("shardflow.secrets")
_lock = threading.Lock()
_cache: dict[tuple[str, int, int], object] = {}


def generate_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode("ascii")


def key_file() -> tuple[Path, bool]:
    """(path, named explicitly?)"""
    named = os.environ.get(KEY_FILE_ENV)
    if named:
        return Path(named), True
    stack = os.environ.get("SHARDFLOW_STACK_DIR") or str(Path(__file__).resolve().parents[2] / ".stack")
    return Path(stack) / "state.key", False


def _create(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return          # another process made it first: use theirs
    with os.fdopen(fd, "w") as f:
        f.write("# shardflow state store key (Fernet); newest first. See docs/operations.md, \"Secrets\".\n")
        f.write(generate_key() + "\n")
    log.warning("created a new state store key file %s (set %s to use another)", path, KEY_FILE_ENV)


def _keyring(create: bool):
    from cryptography.fernet import Fernet, MultiFernet

    path, named = key_file()
    if not path.exists():
        if named or not create:
            raise ErrorCode.STATE_KEY_INVALID.error(
                f"the state store key file {path} does not exist"
                + ("" if named else f" ({KEY_FILE_ENV} is not set: this is the local stack's default)"))
        _create(path)
    try:
        st = path.stat()
        ident = (str(path), st.st_mtime_ns, st.st_size)
        with _lock:
            got = _cache.get(ident)
        if got is not None:
            return got
        lines = [ln.strip() for ln in path.read_text(encoding="ascii").splitlines()]
        keys = [Fernet(ln.encode()) for ln in lines if ln and not ln.startswith("#")]
    except (OSError, UnicodeDecodeError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) else "a line is not a Fernet key (44 url-safe base64 characters)"
        raise ErrorCode.STATE_KEY_INVALID.error(f"cannot read the state store key file {path}: {why}") from None
    if not keys:
        raise ErrorCode.STATE_KEY_INVALID.error(f"the state store key file {path} holds no key")
    ring = MultiFernet(keys)
    with _lock:
        _cache.clear()
        _cache[ident] = ring
    return ring


def is_sealed(value: str | None) -> bool:
    return bool(value) and value.startswith(PREFIX)


def seal(plain: str) -> str:
    """``fernet:<token>`` of ``plain`` under the first key; empty stays empty."""
    if not plain:
        return plain
    return PREFIX + _keyring(create=True).encrypt(plain.encode("utf-8")).decode("ascii")


def unseal(value: str | None) -> str:
    """The secret a stored value holds (values stored before sealing existed come back as they are)."""
    if not is_sealed(value):
        return value or ""
    from cryptography.fernet import InvalidToken

    try:
        return _keyring(create=False).decrypt(value[len(PREFIX):].encode("ascii")).decode("utf-8")
    except InvalidToken:
        path, _ = key_file()
        raise ErrorCode.STATE_KEY_INVALID.error(
            f"a secret in the state store was sealed with a key that is not in {path}") from None


def reseal(value: str | None) -> str:
    """``value`` sealed with the first key (plain values sealed, sealed ones re-encrypted)."""
    if not value:
        return value or ""
    if not is_sealed(value):
        return seal(value)
    from cryptography.fernet import InvalidToken

    try:
        return PREFIX + _keyring(create=False).rotate(value[len(PREFIX):].encode("ascii")).decode("ascii")
    except InvalidToken:
        path, _ = key_file()
        raise ErrorCode.STATE_KEY_INVALID.error(
            f"a secret in the state store was sealed with a key that is not in {path}") from None
