"""Webhook ingestion: Countersign's receiver next to django-anymail's Resend tracking view.

One gunicorn (bench.settings_peers, so both URLs live in the same server process), the same
payload size, the same number of signed deliveries, the same load generator. Each of our events
is verified and stored in the ledger (UNIQUE(endpoint, svix-id)) in the request, and applied to
per-recipient delivery state after it by the batch applier (store first); anymail verifies, parses and fires its `tracking` signal (with no
receiver connected: it stores nothing, which is its documented design).

An additional row, never used for the Countersign/anymail ratio: the same anymail view with a
`tracking` receiver that stores each event (bench.anymail_store), as a team would deploy it.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from datetime import UTC, datetime

from bench.common import make_tenant, reset_tables, vacuum_analyze
from bench.http import Gunicorn, load

ROUNDS = 2  # alternate the endpoints twice; each row reports its better round
ANYMAIL_PATH = "/anymail/resend/tracking/"
ANYMAIL_STORE_PATH = "/bench/anymail-store/resend/tracking/"


def _iso(dt: datetime) -> str:
    return dt.isoformat().replace("+00:00", "Z")


def _setup(n_intents: int):
    from django.utils import timezone

    from intents.hashing import content_hash
    from intents.models import Draft, DraftVersion, SendIntent
    from tests.factories import make_local_mailbox
    from webhooks.models import WebhookEndpoint, WebhookSecret

    reset_tables()
    tenant, user = make_tenant("hooks")
    mailbox = make_local_mailbox(tenant)
    endpoint = WebhookEndpoint.objects.create(
        tenant=tenant, status=WebhookEndpoint.Status.ACTIVE, provider_webhook_id="ep_bench"
    )
    secret_text = "whsec_" + base64.b64encode(os.urandom(24)).decode()
    secret = WebhookSecret(endpoint=endpoint)
    secret.sealed = secret.seal(secret_text)
    secret.save()
    now = timezone.now()
    intents = []
    for i in range(n_intents):
        to = [f"customer{i}@example.com"]
        digest = content_hash(
            mailbox_id=mailbox.pk,
            to=to,
            cc=[],
            bcc=[],
            subject=f"Re: order {i}",
            text="Thanks",
            html="",
            in_reply_to="",
        )
        draft = Draft.objects.create(tenant=tenant, mailbox=mailbox, status=Draft.Status.APPROVED)
        version = DraftVersion.objects.create(
            draft=draft,
            tenant=tenant,
            number=1,
            to=to,
            subject=f"Re: order {i}",
            text="Thanks",
            author_kind=DraftVersion.Author.AGENT,
            content_hash=digest,
        )
        intents.append(
            SendIntent(
                tenant=tenant,
                mailbox=mailbox,
                draft=draft,
                draft_version=version,
                approver=user,
                approved_at=now,
                content_hash=digest,
                recipients={"to": to, "cc": [], "bcc": []},
                idempotency_key=f"cs-bench-{uuid.uuid4().hex}",
                state=SendIntent.State.ACCEPTED,
                next_attempt_at=now,
                provider_message_id=f"<{uuid.uuid4()}@agentmail.to>",
                provider_thread_id=f"thr_{i}",
            )
        )
    SendIntent.objects.bulk_create(intents)
    vacuum_analyze("intents_sendintent", "webhooks_webhookevent", "webhooks_recipientdelivery")
    return endpoint, secret_text, mailbox, intents


def _ours(endpoint, secret_text, mailbox, intents, count: int, offset: int) -> list[dict]:
    from svix.webhooks import Webhook

    signer = Webhook(secret_text)
    requests = []
    for i in range(offset, offset + count):
        intent = intents[(i // 2) % len(intents)]
        kind, key = ("sent", "send") if i % 2 == 0 else ("delivered", "delivery")
        body = json.dumps(
            {
                "type": "event",
                "event_type": f"message.{kind}",
                "event_id": "evt_" + uuid.uuid4().hex,
                key: {
                    "inbox_id": mailbox.inbox_id,
                    "thread_id": intent.provider_thread_id,
                    "message_id": intent.provider_message_id,
                    "timestamp": _iso(datetime.now(UTC)),
                    "recipients": intent.recipients["to"],
                },
            },
            separators=(",", ":"),
        )
        requests.append(_signed(signer, f"/webhooks/agentmail/{endpoint.public_id}/", body))
    return requests


def _anymail(count: int, size: int, path: str = ANYMAIL_PATH) -> list[dict]:
    from django.conf import settings
    from svix.webhooks import Webhook

    signer = Webhook(settings.ANYMAIL["RESEND_SIGNING_SECRET"])
    requests = []
    for i in range(count):
        now = _iso(datetime.now(UTC))
        event = {
            "type": "email.delivered" if i % 2 else "email.sent",
            "created_at": now,
            "data": {
                "email_id": str(uuid.uuid4()),
                "from": "support@hooks.bench.test",
                "to": [f"customer{i}@example.com"],
                "subject": f"Re: order {i}",
                "created_at": now,
                "tags": {"pad": ""},
            },
        }
        body = json.dumps(event, separators=(",", ":"))
        event["data"]["tags"]["pad"] = "x" * max(0, size - len(body))
        body = json.dumps(event, separators=(",", ":"))
        requests.append(_signed(signer, path, body))
    return requests


def _floor(count: int, size: int) -> list[dict]:
    """Deliveries for the store-only reference view: same secret as anymail's, same body size."""
    from django.conf import settings
    from svix.webhooks import Webhook

    signer = Webhook(settings.ANYMAIL["RESEND_SIGNING_SECRET"])
    requests = []
    for i in range(count):
        event = {"event_type": "message.delivered", "event_id": f"evt_{i}", "pad": ""}
        body = json.dumps(event, separators=(",", ":"))
        event["pad"] = "x" * max(0, size - len(body))
        requests.append(
            _signed(signer, "/bench/store-only/", json.dumps(event, separators=(",", ":")))
        )
    return requests


def _signed(signer, path: str, body: str) -> dict:
    svix_id = "msg_" + uuid.uuid4().hex
    return {
        "method": "POST",
        "path": path,
        "headers": {
            "Content-Type": "application/json",
            "svix-id": svix_id,
            "svix-timestamp": str(int(datetime.now(UTC).timestamp())),
            "svix-signature": signer.sign(svix_id, datetime.now(UTC), body),
        },
        "body": body,
    }


def scenario(params: dict) -> dict:
    from django.db import connection

    from bench import anymail_store, views_floor
    from webhooks.models import RecipientDelivery, WebhookEvent
    from webhooks.services import applier

    events, concurrency = params["events"], params["concurrency"]
    endpoint, secret_text, mailbox, intents = _setup(max(1, events // 2))
    per_round = max(1, events // ROUNDS)
    ours_requests = [
        _ours(endpoint, secret_text, mailbox, intents, per_round, r * per_round)
        for r in range(ROUNDS)
    ]
    size = round(sum(len(r["body"]) for r in ours_requests[0]) / per_round)
    peer_requests = [_anymail(per_round, size) for _ in range(ROUNDS)]
    floor_requests = [_floor(per_round, size) for _ in range(ROUNDS)]
    store_requests = [_anymail(per_round, size, ANYMAIL_STORE_PATH) for _ in range(ROUNDS)]
    warm_ours = _ours(endpoint, secret_text, mailbox, intents, 20, 10**6)
    phases = [
        warm_ours + _anymail(20, size) + _floor(20, size) + _anymail(20, size, ANYMAIL_STORE_PATH)
    ]
    for r in range(ROUNDS):
        phases += [ours_requests[r], peer_requests[r], floor_requests[r], store_requests[r]]
    with connection.cursor() as cursor:
        for module in (views_floor, anymail_store):
            cursor.execute(module.CREATE)
            cursor.execute(f"TRUNCATE {module.TABLE}")
    with Gunicorn("bench.settings_peers", workers=params["http_workers"]) as server:
        measured = load(server.base, *phases, concurrency=concurrency)[1:]
        description = server.description
    # Store first: the receiver only stores; apply what it stored, as the woken task would, so
    # the row below counts each event applied (once) after the run.
    applier.events_apply_pending(settle=0)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {views_floor.TABLE}")  # noqa: S608
        floor_stored = cursor.fetchone()[0] - 20
        cursor.execute(f"SELECT count(*) FROM {anymail_store.TABLE}")  # noqa: S608
        anymail_stored = cursor.fetchone()[0] - 20
    rounds = {
        "ours": measured[0::4],
        "anymail": measured[1::4],
        "floor": measured[2::4],
        "anymail_store": measured[3::4],
    }
    stored = WebhookEvent.objects.exclude(svix_id__in=[w["headers"]["svix-id"] for w in warm_ours])
    best = {k: max(v, key=lambda x: x["per_s"]) for k, v in rounds.items()}
    ours = {
        "name": "Countersign /webhooks/agentmail/<id>/ (verify+store; applied after by the batch applier)",
        **best["ours"],
        "stored": stored.count(),
        "applied": stored.filter(state=WebhookEvent.State.APPLIED).count(),
        "deliveries": RecipientDelivery.objects.count(),
        "rounds_per_s": [x["per_s"] for x in rounds["ours"]],
    }
    peer = {
        "name": "django-anymail /anymail/resend/tracking/ (verify+signal)",
        **best["anymail"],
        "stored": 0,
        "applied": "-",
        "rounds_per_s": [x["per_s"] for x in rounds["anymail"]],
    }
    floor = {
        "name": "reference: verify + one INSERT, nothing applied (bench-only view)",
        **best["floor"],
        "stored": floor_stored,
        "applied": "-",
        "rounds_per_s": [x["per_s"] for x in rounds["floor"]],
    }
    peer_storing = {
        "name": "additional: django-anymail + a tracking receiver that stores each event",
        **best["anymail_store"],
        "stored": anymail_stored,
        "applied": "-",
        "rounds_per_s": [x["per_s"] for x in rounds["anymail_store"]],
    }
    return {
        "server": description,
        "concurrency": concurrency,
        "body_bytes": size,
        "events_per_endpoint": per_round * ROUNDS,
        "rows": [ours, peer, floor, peer_storing],
        "ratio": round(ours["per_s"] / peer["per_s"], 2) if peer["per_s"] else None,
        "ratio_vs_anymail_store": (
            round(ours["per_s"] / peer_storing["per_s"], 2) if peer_storing["per_s"] else None
        ),
    }
