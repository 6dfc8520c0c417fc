"""Security baseline across the product: production cookie flags, no secret in logs, each
tenant's own AgentMail key on every worker call. (CSRF on every staff route: tests/ui.)"""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from intents import sending, services
from intents.models import Draft, DraftVersion
from tenants.tokens import token_create
from tests.tenants.test_settings import PRODUCTION_ENV

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def test_production_cookies_are_secure_httponly_and_host_prefixed(settings):
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in PRODUCTION_ENV and k != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    probe = (
        "import json; from django.conf import settings as s; print(json.dumps({k: getattr(s, k) for k in ["
        "'SESSION_COOKIE_SECURE','SESSION_COOKIE_HTTPONLY','SESSION_COOKIE_NAME','SESSION_COOKIE_SAMESITE',"
        "'CSRF_COOKIE_SECURE','CSRF_COOKIE_HTTPONLY','CSRF_COOKIE_NAME','SECURE_HSTS_SECONDS',"
        "'SECURE_SSL_REDIRECT','X_FRAME_OPTIONS','DEBUG']}))"
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", probe],
        cwd=ROOT,
        env={**base, **PRODUCTION_ENV, "DATABASE_URL": settings.DATABASE_URL},
        capture_output=True,
        text=True,
        timeout=120,
    )
    values = json.loads(result.stdout.strip().splitlines()[-1])
    assert values == {
        "SESSION_COOKIE_SECURE": True,
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_NAME": "__Host-cs_session",
        "SESSION_COOKIE_SAMESITE": "Lax",
        "CSRF_COOKIE_SECURE": True,
        "CSRF_COOKIE_HTTPONLY": True,
        "CSRF_COOKIE_NAME": "__Host-cs_csrf",
        "SECURE_HSTS_SECONDS": 31536000,
        "SECURE_SSL_REDIRECT": True,
        "X_FRAME_OPTIONS": "DENY",
        "DEBUG": False,
    }


def _approve(draft, approver):
    version = DraftVersion.objects.get(draft=draft, number=draft.current_version)
    return services.draft_approve(
        tenant=draft.tenant,
        draft_id=draft.pk,
        version=version.number,
        content_hash=version.content_hash,
        actor=approver,
    )


def test_no_secret_or_body_reaches_the_logs_through_a_whole_send(
    tenant_a, member_of, mailbox_factory, sandbox, caplog
):
    caplog.set_level(logging.DEBUG)
    admin = member_of(tenant_a, "admin").user
    mailbox = mailbox_factory(tenant_a)
    _, agent_token = token_create(
        tenant=tenant_a,
        name="logs",
        scopes=["drafts:write", "drafts:read"],
        mailbox_ids=[],
        expires_at=None,
        actor=admin,
    )
    canary = "canary-body-7f3a9e1c the customer's private words"
    api = Client()
    created = api.post(
        "/api/v1/drafts",
        data=json.dumps(
            {
                "mailbox": mailbox.address,
                "to": ["c@example.com"],
                "subject": "Re: hi",
                "text": canary,
            }
        ),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {agent_token}",
        HTTP_IDEMPOTENCY_KEY="logs-1",
    )
    assert created.status_code == 201, created.content
    draft = Draft.objects.get(pk=created.json()["id"])
    intent = _approve(draft, admin)
    assert sending.run_once(intent_id=intent.pk) == 1
    intent.refresh_from_db()
    assert intent.state == "accepted"
    from webhooks.models import WebhookSecret

    secrets = [
        mailbox.api_key(),
        WebhookSecret.objects.get(endpoint__tenant=tenant_a).plaintext(),
        agent_token,
        canary,
    ]
    leaked = [s[:12] for s in secrets if s in caplog.text]
    assert leaked == []
    assert "intents.intent.accepted" in caplog.text


def test_one_worker_uses_each_tenants_own_key_for_each_call(
    tenant_a, tenant_b, member_of, mailbox_factory, sandbox
):
    mailboxes = [mailbox_factory(tenant_a), mailbox_factory(tenant_b)]
    approvers = [member_of(tenant_a, "approver").user, member_of(tenant_b, "approver").user]
    intents = []
    for n in range(4):
        mailbox, approver = mailboxes[n % 2], approvers[n % 2]
        draft = services.draft_create(
            tenant=mailbox.tenant,
            mailbox=mailbox,
            to=[f"c{n}@example.com"],
            subject=f"n{n}",
            text="t",
            actor_user=approver,
        )
        intents.append(_approve(draft, approver))
    worker = "one-worker"
    for intent in intents:
        assert sending.run_once(worker=worker, intent_id=intent.pk) == 1
    used = []
    for intent in intents:
        send = sandbox.ledger(idempotency_key=intent.idempotency_key)
        used.append((send[0]["inbox_id"], send[0]["api_key_id"]))
    assert used == [(m.inbox_id, m.provider_api_key_id) for m in mailboxes * 2]
