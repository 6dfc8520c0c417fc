"""The demo agent plays a conversation end to end: sandbox inbound mail, then a draft via HTTP."""

from __future__ import annotations

import json
import os
import stat
import uuid

import pytest
from django.core.management import call_command
from django.db import connections

from intents.models import Draft
from tenants.models import AgentToken
from tests.factories import TenantFactory
from webhooks.models import InboundMessage


@pytest.mark.django_db(transaction=True)
def test_one_round_drafts_a_reply_to_an_injected_customer_mail(
    live_server, mailbox_factory, sandbox, settings, monkeypatch, tmp_path
):
    # The customer's mail reaches us through the sandbox's signed webhook, as in the demo: a reply
    # may only answer a message its mailbox has recorded. The sandbox keeps its connections to the
    # live server alive, so each request closes its database connection (see test_end_to_end).
    settings.PUBLIC_BASE_URL = live_server.url
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    tenant = TenantFactory(slug="demo-acme", name="Demo Acme")
    mailbox = mailbox_factory(tenant, username=f"demo-{uuid.uuid4().hex[:6]}")
    token_file = tmp_path / "tokens.json"

    for _ in range(2):
        call_command(
            "demo_agent",
            "--once",
            "--api-url",
            live_server.url,
            "--tenants",
            "demo-acme,no-such-tenant",
            "--token-file",
            str(token_file),
            # The agent's random revision would give a draft a second version one round in five.
            "--revise-chance",
            "0",
        )

    drafts = list(Draft.objects.filter(tenant=tenant).order_by("id"))
    stored = json.loads(token_file.read_text())
    assert len(drafts) == 2
    assert {d.mailbox_id for d in drafts} == {mailbox.pk}
    assert all(d.in_reply_to.endswith("@sandbox.invalid>") for d in drafts)
    for draft in drafts:
        answered = InboundMessage.objects.get(mailbox=mailbox, message_id=draft.in_reply_to)
        assert draft.thread_id == answered.thread_id
        assert draft.versions.get().subject == "Re: " + answered.subject
    assert all(d.agent_token.name == "demo-agent" for d in drafts)
    assert AgentToken.objects.filter(tenant=tenant).count() == 1
    assert list(stored) == ["demo-acme"]
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600


@pytest.mark.django_db
def test_a_server_that_is_not_up_is_an_error_the_loop_backs_off_from(tmp_path, tenant_a):
    from intents.management.commands.demo_agent import DemoAgent, Unavailable

    agent = DemoAgent(
        api_url="http://127.0.0.1:9",
        sandbox_url="http://127.0.0.1:9",
        tenant_slugs=[tenant_a.slug],
        target=5,
        token_file=tmp_path / "tokens.json",
        write=lambda line: None,
    )

    with pytest.raises(Unavailable):
        agent.round()
