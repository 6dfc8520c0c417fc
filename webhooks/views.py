"""The AgentMail webhook receiver: verify → normalise → store (one INSERT); applied after, in batches.

Answers: 2xx for a stored, duplicate or ignored event (Svix must stop retrying); 400 for anything
unverifiable or nested deeper than ``MAX_JSON_DEPTH`` (nothing stored); 404 for an unknown
endpoint; 413 for an oversized body. Bad input never produces a 5xx, which Svix would retry for
a day.

The endpoint row and its opened secrets are kept per process for ``ENDPOINT_CACHE_SECONDS``
(5 s), keyed by the endpoint's public id: two queries and the decryption per event otherwise.
What that TTL means for operators:

- a newly stored secret (rotation) is used at once: a delivery that fails verification against
  cached secrets is verified again against freshly loaded ones before it is refused;
- a retired secret, or a disabled endpoint, stops being accepted within ``ENDPOINT_CACHE_SECONDS``;
- unknown or disabled endpoints are never cached (a new endpoint works on its first delivery).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from mailboxes.crypto import SecretUnreadable
from webhooks.models import WebhookEndpoint, WebhookSecret
from webhooks.services import receive
from webhooks.verification import VerificationFailed, meta_signature_headers, verify_delivery

log = logging.getLogger("webhooks.views")

# AgentMail caps payloads at 1 MB (settings, "Request bodies").
MAX_BODY_BYTES = settings.WEBHOOK_BODY_MAX_BYTES
ENDPOINT_CACHE_SECONDS = 5.0
ENDPOINT_CACHE_SIZE = 256


@dataclass
class _Opened:
    endpoint: WebhookEndpoint
    secrets: list[str]
    loaded_at: float
    touched_at: float | None = None


_endpoints: dict[str, _Opened] = {}


def _problem(status: int, title: str, detail: str = "") -> JsonResponse:
    body = {"type": "about:blank", "title": title, "status": status}
    if detail:
        body["detail"] = detail
    return JsonResponse(body, status=status, content_type="application/problem+json")


def _secrets(endpoint: WebhookEndpoint) -> list[str]:
    opened = []
    for secret in WebhookSecret.objects.filter(endpoint=endpoint, retired_at__isnull=True).order_by(
        "-created_at"
    ):
        secret.endpoint = endpoint
        try:
            opened.append(secret.plaintext())
        except SecretUnreadable:
            log.error(
                "webhooks.secret.unreadable",
                extra={"endpoint_id": endpoint.pk, "secret_id": secret.pk},
            )
    return opened


def _load(key: str) -> _Opened | None:
    endpoint = (
        WebhookEndpoint.objects.select_related("tenant")
        .filter(public_id=key)
        .exclude(status=WebhookEndpoint.Status.DISABLED)
        .first()
    )
    if endpoint is None:
        _endpoints.pop(key, None)
        return None
    opened = _Opened(endpoint, _secrets(endpoint), time.monotonic())
    if key not in _endpoints and len(_endpoints) >= ENDPOINT_CACHE_SIZE:
        _endpoints.pop(next(iter(_endpoints)))  # the oldest entry
    _endpoints[key] = opened
    return opened


def _opened(key: str) -> tuple[_Opened | None, bool]:
    """(endpoint and secrets, whether they came from the cache)."""
    cached = _endpoints.get(key)
    if cached is not None and time.monotonic() - cached.loaded_at < ENDPOINT_CACHE_SECONDS:
        return cached, True
    return _load(key), False


@csrf_exempt
def no_such_endpoint(request: HttpRequest) -> JsonResponse:
    return _problem(404, "Not found")


@csrf_exempt
@require_POST
def agentmail_webhook(request: HttpRequest, endpoint_id) -> JsonResponse:
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return _problem(400, "Bad request", "Content-Length is not a number.")
    if declared > MAX_BODY_BYTES:
        return _problem(413, "Payload too large", f"The limit is {MAX_BODY_BYTES} bytes.")
    key = str(endpoint_id)
    opened, from_cache = _opened(key)
    if opened is None:
        return _problem(404, "Not found")
    try:
        body = request.body
    except RequestDataTooBig:
        return _problem(413, "Payload too large", f"The limit is {MAX_BODY_BYTES} bytes.")
    if len(body) > MAX_BODY_BYTES:
        return _problem(413, "Payload too large", f"The limit is {MAX_BODY_BYTES} bytes.")
    endpoint = opened.endpoint
    try:
        try:
            delivery = verify_delivery(
                secrets=opened.secrets, body=body, headers=meta_signature_headers(request.META)
            )
        except VerificationFailed:
            if not from_cache:
                raise
            # Perhaps signed with a secret stored since we cached: look again before refusing.
            opened = _load(key)
            if opened is None:
                return _problem(404, "Not found")
            endpoint = opened.endpoint
            delivery = verify_delivery(
                secrets=opened.secrets, body=body, headers=meta_signature_headers(request.META)
            )
    except VerificationFailed as exc:
        log.warning(
            "webhooks.delivery.unverified",
            extra={
                "tenant_id": endpoint.tenant_id,
                "endpoint_id": endpoint.pk,
                "reason": exc.reason,
            },
        )
        return _problem(400, "Webhook verification failed", exc.reason)
    received = receive.event_receive(
        tenant=endpoint.tenant,
        endpoint=endpoint,
        svix_id=delivery.svix_id,
        payload=delivery.payload,
    )
    now = time.monotonic()
    interval = receive.ENDPOINT_TOUCH_INTERVAL.total_seconds()
    if opened.touched_at is None or now - opened.touched_at >= interval:
        # The UPDATE itself writes at most once a minute; this spares the statement per event.
        receive.endpoint_touch(endpoint=endpoint)
        opened.touched_at = now
    return JsonResponse(
        {"received": True, "duplicate": not received.created, "state": received.state}
    )
