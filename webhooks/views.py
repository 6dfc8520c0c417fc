"""The AgentMail webhook receiver: verify → normalise → store and apply (one short transaction).

Answers: 2xx for a stored, duplicate or ignored event (Svix must stop retrying); 400 for anything
unverifiable (nothing stored); 404 for an unknown endpoint; 413 for an oversized body. Bad input
never produces a 5xx, which Svix would retry for a day.
"""

from __future__ import annotations

import logging

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from mailboxes.crypto import SecretUnreadable
from webhooks import services
from webhooks.models import WebhookEndpoint, WebhookSecret
from webhooks.verification import VerificationFailed, verify_delivery

log = logging.getLogger("webhooks.views")

# AgentMail caps payloads at 1 MB and drops the bodies beyond that (reference §5.3).
MAX_BODY_BYTES = 1024 * 1024


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


@csrf_exempt
@require_POST
def agentmail_webhook(request: HttpRequest, endpoint_id) -> JsonResponse:
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return _problem(400, "Bad request", "Content-Length is not a number.")
    if declared > MAX_BODY_BYTES:
        return _problem(413, "Payload too large", f"The limit is {MAX_BODY_BYTES} bytes.")
    endpoint = (
        WebhookEndpoint.objects.select_related("tenant")
        .filter(public_id=endpoint_id)
        .exclude(status=WebhookEndpoint.Status.DISABLED)
        .first()
    )
    if endpoint is None:
        return _problem(404, "Not found")
    try:
        body = request.body
    except RequestDataTooBig:
        return _problem(413, "Payload too large", f"The limit is {MAX_BODY_BYTES} bytes.")
    if len(body) > MAX_BODY_BYTES:
        return _problem(413, "Payload too large", f"The limit is {MAX_BODY_BYTES} bytes.")
    try:
        delivery = verify_delivery(secrets=_secrets(endpoint), body=body, headers=request.headers)
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
    received = services.event_receive(
        tenant=endpoint.tenant,
        endpoint=endpoint,
        svix_id=delivery.svix_id,
        payload=delivery.payload,
    )
    services.endpoint_touch(endpoint=endpoint)
    return JsonResponse(
        {"received": True, "duplicate": not received.created, "state": received.state}
    )
