"""Operator endpoints: liveness, readiness and Prometheus metrics.

``/metrics`` needs ``Authorization: Bearer $METRICS_TOKEN``; without a configured token it answers
404, so a deployment never exposes it by accident.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.db import connection
from django.db.models import Count, Max, Min, Q
from django.db.models.functions import Now
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

# config/ is at both ends of the house (DESIGN.md): this module is its top, an entry point like
# the views, so it may read the domain apps' tables.
from intents.models import ProviderThrottle, SendAttempt, SendIntent
from intents.selectors import oldest_queued_age_seconds
from webhooks.models import WebhookEvent


@require_GET
@never_cache
def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


@require_GET
@never_cache
def readyz(request: HttpRequest) -> HttpResponse:
    checks = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"error: {type(exc).__name__}"
    try:
        from django_q.brokers import get_broker

        broker = get_broker()
        checks["broker"] = "ok" if broker.ping() else "error: no answer"
    except Exception as exc:
        checks["broker"] = f"error: {type(exc).__name__}"
    ready = all(value == "ok" for value in checks.values())
    return JsonResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status=200 if ready else 503,
    )


def _authorised(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    if not token:
        raise Http404
    given = request.headers.get("Authorization", "")
    return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())


def _line(name: str, value, labels: dict[str, str] | None = None) -> str:
    if labels:
        inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        return f"{name}{{{inner}}} {value}"
    return f"{name} {value}"


@require_GET
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    if not _authorised(request):
        return HttpResponse("unauthorised\n", status=401, content_type="text/plain")
    out: list[str] = []
    out.append("# HELP countersign_intents Send intents by state.")
    out.append("# TYPE countersign_intents gauge")
    counts = dict(
        SendIntent.objects.values_list("state").annotate(n=Count("id")).values_list("state", "n")
    )
    for state in SendIntent.State.values:
        out.append(_line("countersign_intents", counts.get(state, 0), {"state": state}))

    age = oldest_queued_age_seconds() or 0.0
    out.append("# HELP countersign_oldest_queued_seconds Age of the oldest due queued intent.")
    out.append("# TYPE countersign_oldest_queued_seconds gauge")
    out.append(_line("countersign_oldest_queued_seconds", round(age, 3)))

    out.append("# HELP countersign_attempts_total Provider calls by kind and outcome.")
    out.append("# TYPE countersign_attempts_total counter")
    for row in (
        SendAttempt.objects.values("kind", "outcome")
        .annotate(n=Count("id"))
        .order_by("kind", "outcome")
    ):
        out.append(
            _line(
                "countersign_attempts_total",
                row["n"],
                {"kind": row["kind"], "outcome": row["outcome"]},
            )
        )
    rate_limited = SendAttempt.objects.filter(http_status=429).count()
    out.append("# HELP countersign_provider_429_total Provider answers 429.")
    out.append("# TYPE countersign_provider_429_total counter")
    out.append(_line("countersign_provider_429_total", rate_limited))

    out.append("# HELP countersign_circuit_open Circuit breaker state per provider key (1 = open).")
    out.append("# TYPE countersign_circuit_open gauge")
    for key_ref, circuit in ProviderThrottle.objects.values_list("key_ref", "circuit"):
        out.append(
            _line(
                "countersign_circuit_open",
                int(circuit != "closed"),
                {"key": key_ref, "state": circuit},
            )
        )

    ledger = WebhookEvent.objects.aggregate(
        total=Count("id"),
        unapplied=Count("id", filter=Q(state__in=["pending", "deferred"])),
        oldest_unapplied=Min("received_at", filter=Q(state="pending")),
        now=Max(Now()),
    )
    lag = 0.0
    if ledger["oldest_unapplied"] is not None:
        lag = max(0.0, (ledger["now"] - ledger["oldest_unapplied"]).total_seconds())
    out.append("# HELP countersign_webhook_ledger_rows Webhook events stored.")
    out.append("# TYPE countersign_webhook_ledger_rows gauge")
    out.append(_line("countersign_webhook_ledger_rows", ledger["total"]))
    out.append(_line("countersign_webhook_unapplied", ledger["unapplied"]))
    out.append(
        "# HELP countersign_webhook_lag_seconds Age of the oldest stored but unapplied event."
    )
    out.append("# TYPE countersign_webhook_lag_seconds gauge")
    out.append(_line("countersign_webhook_lag_seconds", round(lag, 3)))
    return HttpResponse("\n".join(out) + "\n", content_type="text/plain; version=0.0.4")
