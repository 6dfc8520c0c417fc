"""Secrets at rest: the sealing helpers live in common.crypto (below every app, so the identity
layer in tenants can seal its secrets too); mailboxes and its callers keep importing them here."""

from common.crypto import (
    SecretUnreadable,
    generate_key,
    key_id_of,
    key_ring,
    needs_reseal,
    seal,
    unseal,
)

__all__ = [
    "SecretUnreadable",
    "generate_key",
    "key_id_of",
    "key_ring",
    "needs_reseal",
    "seal",
    "unseal",
]
