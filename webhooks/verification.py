"""Svix signature verification of AgentMail webhook deliveries (reference §5.5).

svix 2.x ``Webhook.verify`` returns ``None`` (1.x returned the parsed body), so the caller parses
the body itself. Besides ``WebhookVerificationError`` the library raises ``ValueError`` for a
signature entry without a comma and ``UnicodeDecodeError`` for a non-UTF-8 body; anymail catches
only the first and answers 500 to the others, which makes Svix retry a forgery for a day.
"""

from __future__ import annotations

import binascii
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from svix.webhooks import Webhook, WebhookVerificationError

from common import strict_json

log = logging.getLogger("webhooks.verification")

# Svix sends the svix-* names; white-labelled senders use the Standard Webhooks names.
_HEADER_NAMES = (
    "svix-id",
    "svix-timestamp",
    "svix-signature",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
)
SVIX_ID_MAX_LENGTH = 100
# AgentMail's events nest a few levels deep. A far deeper body is not one of them, and Python's
# json raises RecursionError (not ValueError) past about a thousand levels; refusing well before
# that also bounds every later walk over the payload.
MAX_JSON_DEPTH = 32


class VerificationFailed(Exception):
    """The delivery cannot be trusted; ``reason`` is a stable slug safe to log and return."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class VerifiedDelivery:
    svix_id: str
    payload: dict


_META_KEYS = {name: "HTTP_" + name.upper().replace("-", "_") for name in _HEADER_NAMES}


def meta_signature_headers(meta: Mapping[str, str]) -> dict[str, str]:
    """The verification headers of a request, read from ``request.META`` (the WSGI environ):
    ``request.headers`` parses every header of the request to offer these six."""
    return {name: meta[key] for name, key in _META_KEYS.items() if key in meta}


def signature_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Only the headers that take part in verification, lower-cased."""
    lowered = {k.lower(): v for k, v in headers.items()}
    return {name: lowered[name] for name in _HEADER_NAMES if name in lowered}


def verify_delivery(
    *, secrets: Iterable[str], body: bytes, headers: Mapping[str, str]
) -> VerifiedDelivery:
    """Verify ``body`` against every secret in turn (several are valid during a rotation).

    Raises ``VerificationFailed`` for anything that is not a correctly signed, fresh JSON object.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise VerificationFailed("body_not_utf8") from None
    wanted = signature_headers(headers)
    svix_id = wanted.get("svix-id") or wanted.get("webhook-id") or ""
    if not svix_id:
        raise VerificationFailed("missing_headers")
    reason = "no_secret"
    for secret in secrets:
        try:
            verifier = Webhook(secret)
        except Exception:
            # A broken stored secret must not hide the others; it is an operator problem.
            log.error("webhooks.secret.unusable")
            continue
        try:
            verifier.verify(text, wanted)
        except WebhookVerificationError as exc:
            reason = _reason_of(str(exc))
            continue
        except (ValueError, binascii.Error, UnicodeDecodeError, TypeError):
            reason = "malformed_signature"
            continue
        break
    else:
        raise VerificationFailed(reason)
    if len(svix_id) > SVIX_ID_MAX_LENGTH:
        raise VerificationFailed("svix_id_too_long")
    if not (svix_id.isascii() and svix_id.isprintable()):
        # Svix ids are ASCII tokens; a NUL in one would fail the ledger insert (a 500).
        raise VerificationFailed("malformed_svix_id")
    try:
        payload = strict_json.loads(text, max_depth=MAX_JSON_DEPTH)
    except strict_json.JSONRefused as exc:
        raise VerificationFailed(_JSON_REASONS[exc.code]) from None
    if not isinstance(payload, dict):
        raise VerificationFailed("body_not_object")
    return VerifiedDelivery(svix_id=svix_id, payload=payload)


# strict_json's refusals as reasons. A duplicate key is refused, not read: the signature covers
# both values, and the event would be applied with whichever one Python's json kept.
_JSON_REASONS = {
    "malformed": "body_not_json",
    "not_utf8": "body_not_utf8",
    "not_finite": "number_not_finite",
    "number_too_long": "number_too_long",
    "too_deep": "body_too_deep",
    "duplicate_key": "duplicate_key",
    "too_many_values": "body_too_many_values",
}


def _reason_of(message: str) -> str:
    message = message.lower()
    if "missing" in message:
        return "missing_headers"
    if "too old" in message:
        return "timestamp_too_old"
    if "too new" in message:
        return "timestamp_too_new"
    if "invalid signature headers" in message:
        return "bad_timestamp"
    return "bad_signature"
