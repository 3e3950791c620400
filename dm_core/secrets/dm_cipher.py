"""DM's password encryption (``dmctl encrypt``), so DM users' files work unchanged.

Format (DM ``pkg/encrypt``): ``base64(iv || "@" || AES-CFB(key, iv, plaintext))`` with a
16-byte random IV, AES with a 32-byte key, CFB with full-block (128-bit) feedback.
There is no authentication tag: decrypting with the wrong key yields garbage, not an error.

Keys, in the order they are tried:

1. ``SHARDFLOW_SECRET_KEY_PATH``: a file holding a 64-hex-digit AES-256 key, the same file
   DM-master's ``secret-key-path`` names (DM >= v8.0 needs one to encrypt at all);
2. DM's former built-in key (DM releases until early 2024 encrypted with it and had no
   other), so files written with an older ``dmctl encrypt`` keep working.

``reveal`` is DM's ``DecryptOrPlaintext``: a value that is not a ciphertext, or that no key
turns into printable text, is the password itself. Because CFB cannot tell a wrong key,
"printable UTF-8" is the test of a right one (random bytes pass it with a chance of about
(95/256)^n for n bytes). ``encrypt`` uses the configured key only (as DM >= v8.0 does):
encrypting with a key every DM binary ships would protect nothing.

    >>> key = bytes(range(32))
    >>> decrypt(encrypt("s3cret", key), key)
    's3cret'
    >>> reveal("/Q7B9DizNLLTTfiZHv9WoEAKamfpIUs=")   # DM's integration tests' password, old dmctl
    '123456'
    >>> reveal("plain-password")
    'plain-password'
"""

from __future__ import annotations

import base64
import binascii
import os

from dm_core.errors import ErrorCode

KEY_PATH_ENV = "SHARDFLOW_SECRET_KEY_PATH"
_IV_LEN = 16
_SEP = b"@"
# DM's built-in key before it became configurable (pkg/encrypt, removed in pingcap/tiflow#9494).
LEGACY_KEY = bytes.fromhex("a529b7665997f043a30ac8fadcb51d6aa032c226ab5b7750530b12b8c1a16a48")


class NotCiphertext(ValueError):
    """The text is not in DM's ciphertext format (so it is a plain password)."""


def load_key(path: str | None = None) -> bytes | None:
    """The AES key in ``path`` (default: $SHARDFLOW_SECRET_KEY_PATH), or None when none is configured."""
    path = path or os.environ.get(KEY_PATH_ENV) or None
    if not path:
        return None
    try:
        text = open(path, encoding="ascii").read().strip()
        key = bytes.fromhex(text)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        reason = e.strerror if isinstance(e, OSError) else "not hexadecimal"
        raise ErrorCode.SECRET_KEY_INVALID.error(f"cannot read the secret key file {path} ({KEY_PATH_ENV}): {reason}") from None
    if len(key) != 32:
        raise ErrorCode.SECRET_KEY_INVALID.error(
            f"the secret key file {path} ({KEY_PATH_ENV}) holds {len(key)} bytes; it must hold a hex AES-256 key "
            "of 64 characters")
    return key


def _cipher(key: bytes, iv: bytes):
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    try:    # cryptography >= 47 keeps CFB among its "decrepit" modes
        from cryptography.hazmat.decrepit.ciphers.modes import CFB
    except ImportError:
        from cryptography.hazmat.primitives.ciphers.modes import CFB
    return Cipher(algorithms.AES(key), CFB(iv))


def encrypt(plaintext: str, key: bytes | None = None) -> str:
    """DM's ciphertext of ``plaintext`` under ``key`` (default: the configured key; none is an error)."""
    key = key if key is not None else load_key()
    if key is None:
        raise ErrorCode.SECRET_KEY_INVALID.error(
            f"no secret key is configured: {KEY_PATH_ENV} is not set",
            workaround=f"Write a random AES-256 key as 64 hex digits to a file (`openssl rand -hex 32 > KEY`), "
                       f"`chmod 600` it and export {KEY_PATH_ENV}=KEY (DM-master's secret-key-path file works too).")
    iv = os.urandom(_IV_LEN)
    enc = _cipher(key, iv).encryptor()
    body = enc.update(plaintext.encode("utf-8")) + enc.finalize()
    return base64.b64encode(iv + _SEP + body).decode("ascii")


def _split(ciphertext: str) -> tuple[bytes, bytes]:
    try:
        raw = base64.b64decode(ciphertext, validate=True)
    except (binascii.Error, ValueError):
        raise NotCiphertext("not base64") from None
    if len(raw) < _IV_LEN + len(_SEP) or raw[_IV_LEN:_IV_LEN + len(_SEP)] != _SEP:
        raise NotCiphertext("no IV separator")
    return raw[:_IV_LEN], raw[_IV_LEN + len(_SEP):]


def decrypt(ciphertext: str, key: bytes | None = None) -> str:
    """The plaintext of a DM ciphertext under one key (default: the configured key, else DM's old one).

    NotCiphertext when the text is not in DM's format; ValueError when the key turns it into
    something that is not printable text (a wrong key)."""
    iv, body = _split(ciphertext)
    key = key if key is not None else (load_key() or LEGACY_KEY)
    dec = _cipher(key, iv).decryptor()
    out = dec.update(body) + dec.finalize()
    try:
        text = out.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the key does not decrypt this text") from None
    if not text.isprintable():
        raise ValueError("the key does not decrypt this text")
    return text


def reveal(value: str) -> str:
    """The password a config value stands for (DM's DecryptOrPlaintext, trying each known key)."""
    if not value:
        return value
    try:
        _split(value)
    except NotCiphertext:
        return value
    keys = [k for k in (load_key(), LEGACY_KEY) if k is not None]
    for key in keys:
        try:
            return decrypt(value, key)
        except ValueError:
            continue
    return value
