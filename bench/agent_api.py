"""Agent API: POST /api/v1/drafts with Idempotency-Key, fresh and then replayed, over gunicorn.

Fresh: every request has a new key and creates a draft (token auth, validation, idempotency
record, draft + version + journal in one transaction). Replayed: the same requests again with the
same keys: each must answer the stored response and create nothing.
"""

from __future__ import annotations

import json
import uuid

from bench.common import make_tenant, reset_tables, vacuum_analyze
from bench.http import Gunicorn, load


def _setup():
    from tenants.models import AgentToken
    from tenants.tokens import token_create
    from tests.factories import make_local_mailbox

    reset_tables()
    tenant, user = make_tenant("api")
    mailbox = make_local_mailbox(tenant)
    _, plaintext = token_create(
        tenant=tenant,
        name="bench agent",
        scopes=[AgentToken.Scope.DRAFTS_WRITE, AgentToken.Scope.DRAFTS_READ],
        actor=user,
    )
    return tenant, mailbox, plaintext


def _requests(mailbox, token: str, count: int, tag: str) -> list[dict]:
    requests = []
    for i in range(count):
        body = json.dumps(
            {
                "mailbox": mailbox.address,
                "to": [f"customer{i}@example.com"],
                "subject": f"Re: Where is my order {tag}-{i}?",
                "text": "Hello, your order shipped yesterday; tracking number 1Z999. " * 4,
                "provenance": {"model": "bench", "prompt": "support-v3"},
            }
        )
        requests.append(
            {
                "method": "POST",
                "path": "/api/v1/drafts",
                "headers": {
                    "Authorization": f"Bearer {token}",
                    "Content-Type": "application/json",
                    "Idempotency-Key": f"bench-{tag}-{uuid.uuid4().hex}",
                },
                "body": body,
            }
        )
    return requests


def scenario(params: dict) -> dict:
    from intents.models import ApiIdempotencyKey, Draft

    count, concurrency = params["requests"], params["concurrency"]
    tenant, mailbox, token = _setup()
    vacuum_analyze("intents_draft", "intents_apiidempotencykey")
    fresh = _requests(mailbox, token, count, "fresh")
    with Gunicorn("bench.settings", workers=params["http_workers"]) as server:
        _, first = load(
            server.base, _requests(mailbox, token, 20, "warm"), fresh, concurrency=concurrency
        )
        drafts_after_fresh = Draft.objects.filter(subject_filter(tenant, "fresh")).count()
        (replay,) = load(server.base, fresh, concurrency=concurrency)
        drafts_after_replay = Draft.objects.filter(subject_filter(tenant, "fresh")).count()
        description = server.description
    keys = ApiIdempotencyKey.objects.filter(key__startswith="bench-fresh-").count()
    return {
        "server": description,
        "concurrency": concurrency,
        "rows": [
            {
                "name": "POST /api/v1/drafts, fresh key",
                **first,
                "check": f"{drafts_after_fresh} drafts created",
            },
            {
                "name": "POST /api/v1/drafts, same key replayed",
                **replay,
                "check": f"{drafts_after_replay - drafts_after_fresh} new drafts; {keys} keys",
            },
        ],
        "drafts_created_by_replay": drafts_after_replay - drafts_after_fresh,
    }


def subject_filter(tenant, tag: str):
    from django.db.models import Q

    return Q(tenant=tenant, versions__number=1, versions__subject__contains=f" {tag}-")
