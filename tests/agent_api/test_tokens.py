"""Token services: digest-only storage, shown once, revocation, audit (the admin pages are
tested in tests/console/test_views_tokens.py)."""

from __future__ import annotations

import importlib
import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from tenants.models import AgentToken, AuditEvent
from tenants.tokens import TokenError, token_authenticate, token_create, token_revoke

pytestmark = pytest.mark.django_db


def test_token_format_and_only_a_digest_is_stored(tenant_a):
    token, plaintext = token_create(
        tenant=tenant_a, name="bot", scopes=["drafts:write"], actor=None
    )

    _, prefix, secret = plaintext.split("_", 2)
    assert re.fullmatch(r"cs_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{43}", plaintext)
    assert token.prefix == prefix
    assert len(token.digest) == 64
    with connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(t)::text FROM tenants_agenttoken t")
        stored = cursor.fetchone()[0]
    assert secret not in stored
    assert plaintext not in stored
    assert token_authenticate(plaintext).pk == token.pk


def test_authenticate_refuses_wrong_secret_unknown_prefix_and_garbage(tenant_a):
    _, plaintext = token_create(tenant=tenant_a, name="bot", scopes=["drafts:read"], actor=None)

    assert token_authenticate(plaintext[:-1] + ("A" if plaintext[-1] != "A" else "B")) is None
    assert token_authenticate("cs_ZZZZZZZZ_" + plaintext.split("_", 2)[2]) is None
    assert token_authenticate("") is None
    assert token_authenticate(plaintext + "x") is None
    assert token_authenticate(plaintext.upper()) is None


def test_create_and_revoke_are_audited(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    token, _ = token_create(
        tenant=tenant_a, name="bot", scopes=["drafts:read", "drafts:write"], actor=admin
    )
    token_revoke(tenant=tenant_a, token_id=token.pk, actor=admin)

    actions = list(
        AuditEvent.objects.filter(tenant=tenant_a, object_id=str(token.pk))
        .order_by("id")
        .values_list("action", "actor")
    )
    assert actions == [("token.created", admin.pk), ("token.revoked", admin.pk)]


def test_revoking_twice_or_another_tenants_token_is_refused(tenant_a, tenant_b):
    token, _ = token_create(tenant=tenant_a, name="bot", scopes=["drafts:read"], actor=None)
    token_revoke(tenant=tenant_a, token_id=token.pk, actor=None)

    with pytest.raises(TokenError, match="already revoked"):
        token_revoke(tenant=tenant_a, token_id=token.pk, actor=None)
    with pytest.raises(TokenError, match="No such token"):
        token_revoke(tenant=tenant_b, token_id=token.pk, actor=None)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"scopes": []}, "scopes"),
        ({"scopes": ["drafts:approve"]}, "scopes"),
        ({"expires_at": "past"}, "expires_at"),
    ],
)
def test_create_refuses_bad_input(tenant_a, kwargs, field):
    fields = {"name": "bot", "scopes": ["drafts:read"]}
    fields.update(kwargs)
    if fields.get("expires_at") == "past":
        fields["expires_at"] = timezone.now() - timedelta(seconds=1)

    with pytest.raises(TokenError) as refused:
        token_create(tenant=tenant_a, actor=None, **fields)

    assert refused.value.field == field
    assert AgentToken.objects.count() == 0


def test_create_refuses_another_tenants_mailbox_and_a_duplicate_name(tenant_a, mailbox_b):
    token_create(tenant=tenant_a, name="bot", scopes=["drafts:read"], actor=None)

    with pytest.raises(TokenError, match="Unknown mailbox"):
        token_create(
            tenant=tenant_a,
            name="other",
            scopes=["drafts:read"],
            mailbox_ids=[mailbox_b.pk],
            actor=None,
        )
    with pytest.raises(TokenError, match="already exists"):
        token_create(tenant=tenant_a, name="bot", scopes=["drafts:read"], actor=None)
    assert AgentToken.objects.count() == 1


def test_the_migration_flags_exactly_the_tokens_that_had_no_mailbox(tenant_a, mailbox_factory):
    """Before the flag, an empty mailbox set meant every mailbox: those tokens, and only they,
    keep that reach (tenants/migrations/0009)."""
    from django.apps import apps

    migration = importlib.import_module("tenants.migrations.0009_agent_token_all_mailboxes")
    mailbox = mailbox_factory(tenant_a, username="migr")
    legacy_all = AgentToken.objects.create(tenant=tenant_a, name="a", prefix="legacy01", digest="0")
    legacy_one = AgentToken.objects.create(tenant=tenant_a, name="b", prefix="legacy02", digest="0")
    legacy_one.mailboxes.set([mailbox])

    migration.flag_unrestricted_tokens(apps, None)

    legacy_all.refresh_from_db()
    legacy_one.refresh_from_db()
    assert legacy_all.all_mailboxes is True
    assert legacy_one.all_mailboxes is False
    assert legacy_one.mailbox_scope() == {mailbox.pk}
    assert legacy_all.mailbox_scope() is None


def test_a_tool_failing_on_our_side_answers_the_apis_500_document_without_its_text(
    tenant_a, mailbox_factory, monkeypatch, caplog
):
    """The MCP SDK answers an exception escaping a tool with str(exc): a database error's text
    (a table, a value) reached the agent. A fault injected into the tool's work now gives the
    API's internal_error document, and the exception is logged for us."""
    from agent_api import mcp_tools, operations

    mailbox_factory(tenant_a)
    _, plaintext = token_create(
        tenant=tenant_a, name="bot", scopes=["drafts:read", "drafts:write"], actor=None
    )

    def fault(token):
        raise RuntimeError('relation "secret_table" value 42 is broken')

    monkeypatch.setattr(operations, "list_mailboxes", fault)
    answer = mcp_tools.call_tool(raw_token=plaintext, name="list_mailboxes", arguments={})

    assert answer.is_error is True
    assert answer.document["code"] == "internal_error"
    assert answer.document["status"] == 500
    assert "secret_table" not in json.dumps(answer.document)
    assert "agent_api.mcp.tool_failed" in caplog.text


@pytest.mark.parametrize("name", ["bot\x1b[31m", "\u202egnp.exe", "bot\x00"])
def test_a_token_name_with_a_control_character_is_refused(tenant_a, name):
    with pytest.raises(TokenError) as refused:
        token_create(tenant=tenant_a, name=name, scopes=["drafts:read"], actor=None)

    assert refused.value.field == "name"
    assert "control character" in str(refused.value)
    assert not AgentToken.objects.exists()
