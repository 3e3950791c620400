"""dmctl's secret commands: ``encrypt`` / ``decrypt`` (DM's password format) and
``rotate-state-key`` (re-seal the state store's secrets with a new key)."""

from __future__ import annotations

import sys

from dm_core.errors import ErrorCode


def _text(arg: str) -> str:
    """The argument, or standard input's first line for ``-`` (keeps it out of ps and shell history)."""
    return sys.stdin.readline().rstrip("\r\n") if arg == "-" else arg


def cmd_encrypt(a) -> int:
    from dm_core.secrets import dm_cipher

    print(dm_cipher.encrypt(_text(a.text), dm_cipher.load_key(a.secret_key_path)))
    return 0


def cmd_decrypt(a) -> int:
    from dm_core.secrets import dm_cipher

    text = _text(a.text)
    try:
        keys = [k for k in (dm_cipher.load_key(a.secret_key_path), dm_cipher.LEGACY_KEY) if k is not None]
        for key in keys:
            try:
                print(dm_cipher.decrypt(text, key))
                return 0
            except dm_cipher.NotCiphertext:
                raise
            except ValueError:
                continue
    except dm_cipher.NotCiphertext:
        raise ErrorCode.SECRET_KEY_INVALID.error(
            "the text is not a DM ciphertext (base64 of IV '@' data); as a password it is used as written",
            workaround="Nothing to do, or encrypt it with `dmctl encrypt TEXT`.") from None
    raise ErrorCode.SECRET_KEY_INVALID.error(
        "no known key decrypts the text (tried "
        + ("the key of --secret-key-path / SHARDFLOW_SECRET_KEY_PATH and " if len(keys) > 1 else "")
        + "DM's former built-in key)")


def cmd_rotate_state_key(a) -> int:
    from dm_core.secrets import state_key
    from dm_core.state import StateStore

    if a.generate:
        path, _ = state_key.key_file()
        old = path.read_text(encoding="ascii") if path.exists() else ""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".new")
        tmp.write_text(state_key.generate_key() + "\n" + old, encoding="ascii")
        tmp.chmod(0o600)
        tmp.replace(path)
        print(f"key file {path}: new key added on the first line (older keys kept below it)")
    with StateStore() as store:
        n = store.reseal_secrets()
    print(f"state store: secrets of {n['source']} source(s) and {n['task']} task(s) sealed with the first key; "
          "once every process has seen the new file, older keys may be removed from it")
    return 0


def register(sub) -> None:
    """Add the commands to dmctl's subparsers."""
    help_path = "file with a hex AES-256 key (default: $SHARDFLOW_SECRET_KEY_PATH), as DM's secret-key-path"
    s = sub.add_parser("encrypt", help="encrypt a password the way DM's dmctl does (for task and source files)")
    s.add_argument("text", help="the password, or - to read it from standard input")
    s.add_argument("--secret-key-path", help=help_path)
    s.set_defaults(fn=cmd_encrypt)
    s = sub.add_parser("decrypt", help="decrypt a password written by (DM's) dmctl encrypt")
    s.add_argument("text", help="the ciphertext, or - to read it from standard input")
    s.add_argument("--secret-key-path", help=help_path)
    s.set_defaults(fn=cmd_decrypt)
    s = sub.add_parser("rotate-state-key", help="re-seal the state store's secrets with the key file's first key")
    s.add_argument("--generate", action="store_true",
                   help="first put a newly generated key on the key file's first line")
    s.set_defaults(fn=cmd_rotate_state_key)
