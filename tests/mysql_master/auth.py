"""Password checks of the two auth plugins a MySQL 5.7/8.x server offers by default.

mysql_native_password: the client sends SHA1(pw) XOR SHA1(scramble + SHA1(SHA1(pw))).

caching_sha2_password: the client first sends SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) +
scramble). A server that has this user's SHA256(SHA256(pw)) in its cache checks that and
answers "fast auth success" (AuthMoreData 0x03, then OK). Otherwise it asks for full
authentication (AuthMoreData 0x04): over TLS or a socket the client sends the password in
clear; over plain TCP it first asks for the server's RSA public key (a 0x02 byte), gets it
as AuthMoreData (PEM), and sends RSA-OAEP(password + NUL, XORed with the scramble repeated).
A successful full authentication fills the cache, so the next login takes the fast path.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading

NATIVE = "mysql_native_password"
CACHING_SHA2 = "caching_sha2_password"
FAST_AUTH_SUCCESS = b"\x01\x03"
PERFORM_FULL_AUTH = b"\x01\x04"
REQUEST_PUBLIC_KEY = b"\x02"

_KEY_LOCK = threading.Lock()
_KEY = None   # one RSA key per process: generating one costs ~0.1 s


def scramble() -> bytes:
    """20 random bytes without NUL (the handshake sends them NUL-terminated)."""
    return bytes(b % 127 + 1 for b in os.urandom(20))


def _sha1(b: bytes) -> bytes:
    return hashlib.sha1(b).digest()


def _sha256(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b))


def native_ok(password: str, salt: bytes, response: bytes) -> bool:
    if not password:
        return response == b""
    pw = password.encode()
    expected = _xor(_sha1(pw), _sha1(salt[:20] + _sha1(_sha1(pw))))
    return hmac.compare_digest(expected, response)


def sha2_scramble_ok(password: str, salt: bytes, response: bytes) -> bool:
    if not password:
        return response == b""
    pw = password.encode()
    expected = _xor(_sha256(pw), _sha256(_sha256(_sha256(pw)) + salt[:20]))
    return hmac.compare_digest(expected, response)


def private_key():
    global _KEY
    with _KEY_LOCK:
        if _KEY is None:
            from cryptography.hazmat.primitives.asymmetric import rsa

            _KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return _KEY


def public_key_pem() -> bytes:
    from cryptography.hazmat.primitives import serialization

    return private_key().public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)


def rsa_password(ciphertext: bytes, salt: bytes) -> str | None:
    """The password of a full authentication's RSA-encrypted answer, or None if it does not decrypt."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    try:
        plain = private_key().decrypt(ciphertext, padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()),
                                                               algorithm=hashes.SHA1(), label=None))
    except ValueError:
        return None
    salt = salt[:20]
    clear = bytes(b ^ salt[i % len(salt)] for i, b in enumerate(plain))
    return clear.rstrip(b"\x00").decode("utf-8", "replace")
