"""Bench-only: the least any durable webhook receiver must do, as a reference row.

Verify the Svix signature exactly as the product does (``webhooks.verification``), then make one
INSERT ... ON CONFLICT DO NOTHING into a scratch table, committed with fsync (autocommit: one round
trip, no BEGIN/COMMIT). No endpoint lookup, no secret decryption, no normalisation, nothing
applied. If this row is slower than django-anymail's view, which stores nothing, then no receiver
that stores each event before answering can match anymail on this server.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from webhooks.verification import VerificationFailed, meta_signature_headers, verify_delivery

TABLE = "bench_hook_floor"
# The same view mounted under /webhooks/ (bench.urls_peers), so served as the product's receiver
# is: through config.machine's short middleware chain instead of the browser's.
MACHINE_TABLE = "bench_hook_floor_machine"
CREATES = [
    f"CREATE TABLE IF NOT EXISTS {table} (id bigserial PRIMARY KEY, svix_id text NOT NULL "
    "UNIQUE, received_at timestamptz NOT NULL DEFAULT now(), payload jsonb NOT NULL)"
    for table in (TABLE, MACHINE_TABLE)
]


@csrf_exempt
@require_POST
def store_only(request: HttpRequest, table: str = TABLE) -> JsonResponse:
    secret = settings.ANYMAIL["RESEND_SIGNING_SECRET"]
    try:
        delivery = verify_delivery(
            secrets=[secret], body=request.body, headers=meta_signature_headers(request.META)
        )
    except VerificationFailed as exc:
        return JsonResponse({"error": exc.reason}, status=400)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (svix_id, payload) VALUES (%s, %s::jsonb) "  # noqa: S608
            "ON CONFLICT (svix_id) DO NOTHING",
            [delivery.svix_id, json.dumps(delivery.payload)],
        )
    return JsonResponse({"received": True})
