"""Secrets at rest: AES-GCM with a key ring from the environment.

A sealed value is ``"<kid>:<base64(nonce || ciphertext)>"``. The associated data binds it to its
row (for example ``"mailbox:42:api_key"``), so a ciphertext copied into another tenant's row does
not decrypt. The first key in ``SECRET_ENCRYPTION_KEYS`` seals; every key opens, which lets an
operator prepend a new key, run ``manage.py reencrypt_secrets`` and then drop the old one.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from functools import cache

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings

from config.env import SettingsError


class SecretUnreadable(Exception):
    """The sealed value cannot be opened: unknown key id, tampered data or wrong row."""


# A key id a refusal may quote. Anything else may be the key itself, written before the id
# ("<base64key>:k1"): the refusal quoted it, and the start's error went to every log.
PLAIN_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,32}")


def _refused(number: int, kid: str, plain: str, other: str) -> SettingsError:
    """``plain`` with the key id quoted in place of ``{kid}`` when it is a plain id, else
    ``other`` naming the entry by its place in the list."""
    if PLAIN_KEY_ID.fullmatch(kid):
        return SettingsError("SECRET_ENCRYPTION_KEYS: " + plain.format(kid=repr(kid)))
    return SettingsError(
        f"SECRET_ENCRYPTION_KEYS: entry {number} {other} (the id is not shown: it may be a key "
        "written first)"
    )


@cache
def _key_ring(raw: tuple[str, ...]) -> tuple[str, dict[str, AESGCM]]:
    if not raw:
        raise SettingsError("SECRET_ENCRYPTION_KEYS is empty")
    ring: dict[str, AESGCM] = {}
    for number, entry in enumerate(raw, start=1):
        kid, sep, material = entry.partition(":")
        if not sep or not kid or ":" in kid:
            raise SettingsError("each SECRET_ENCRYPTION_KEYS entry must be 'kid:base64key'")
        try:
            key = base64.b64decode(material, validate=True)
        except ValueError:  # binascii.Error, and base64's own for a character that is not ASCII
            raise _refused(
                number, kid, "key {kid} is not valid base64", "is not valid base64 after its key id"
            ) from None
        if len(key) != 32:
            raise _refused(
                number,
                kid,
                f"key {{kid}} must be 32 bytes, got {len(key)}",
                f"must be 32 bytes after its key id, got {len(key)}",
            )
        if kid in ring:
            # The later entry used to win: a rotation written "new:…,new:old…" re-sealed nothing
            # and lost every secret once the old entry went.
            raise _refused(
                number, kid, "key id {kid} appears twice", "repeats the key id of an earlier entry"
            )
        ring[kid] = AESGCM(key)
    return raw[0].partition(":")[0], ring


def key_ring() -> tuple[str, dict[str, AESGCM]]:
    return _key_ring(tuple(settings.SECRET_ENCRYPTION_KEYS))


def seal(plaintext: str, *, aad: str) -> str:
    primary, ring = key_ring()
    nonce = os.urandom(12)
    ciphertext = ring[primary].encrypt(nonce, plaintext.encode(), aad.encode())
    return f"{primary}:{base64.b64encode(nonce + ciphertext).decode()}"


def unseal(sealed: str, *, aad: str) -> str:
    _, ring = key_ring()
    kid, sep, payload = sealed.partition(":")
    if not sep or kid not in ring:
        if sep and PLAIN_KEY_ID.fullmatch(kid):
            raise SecretUnreadable(f"no encryption key with id {kid!r}")
        # No key id before a colon: a value that was never sealed (written by hand, restored
        # from an export), quoted whole, put the secret itself in the refusal and every log.
        raise SecretUnreadable("not a sealed value (not shown: it may be the secret itself)")
    try:
        blob = base64.b64decode(payload, validate=True)
        return ring[kid].decrypt(blob[:12], blob[12:], aad.encode()).decode()
    except (binascii.Error, InvalidTag, ValueError):
        raise SecretUnreadable("sealed secret failed authentication") from None


def key_id_of(sealed: str) -> str:
    return sealed.partition(":")[0]


def needs_reseal(sealed: str) -> bool:
    primary, _ = key_ring()
    return key_id_of(sealed) != primary


def generate_key(kid: str) -> str:
    """A new ring entry for SECRET_ENCRYPTION_KEYS."""
    return f"{kid}:{base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()}"
