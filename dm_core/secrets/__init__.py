"""Secrets at rest: DM's encrypted passwords in config files, and source passwords in the state store.

Two ciphers, for two different jobs:

- ``dm_cipher``: the format DM's ``dmctl encrypt`` writes into task and source files
  (AES-256-CFB, base64). Files written for DM load here unchanged: an encrypted password is
  decrypted with ``SHARDFLOW_SECRET_KEY_PATH`` (DM's ``secret-key-path``) or DM's old
  built-in key, and anything that is not a ciphertext is taken as plain text, as DM does.
- ``state_key``: Fernet tokens for secrets shardflow itself keeps in the state store
  (source passwords, task files, TLS private keys), with a key file named by
  ``SHARDFLOW_STATE_KEY_FILE``; rotating the key re-seals every row (``dmctl rotate-state-key``).
"""
