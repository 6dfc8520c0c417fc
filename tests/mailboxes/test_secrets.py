"""Secrets at rest: sealed in the database, never in pages or logs, rotatable."""

import io
import logging

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from mailboxes import crypto, provider
from mailboxes.models import Mailbox
from webhooks.models import WebhookSecret

pytestmark = pytest.mark.django_db


def all_text_in_database() -> str:
    """Every text-like column of every Countersign table, as one string to grep."""
    chunks = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' AND data_type IN ('text', 'character varying', 'jsonb')"
        )
        for table, column in cursor.fetchall():
            cursor.execute(f'SELECT "{column}"::text FROM "{table}"')
            chunks.extend(str(row[0]) for row in cursor.fetchall())
    return "\n".join(chunks)


def test_no_plaintext_key_or_webhook_secret_in_db_logs_or_pages(
    tenant_a, member_of, signed_in, mailbox_factory, caplog
):
    caplog.set_level(logging.DEBUG)
    mailbox = mailbox_factory(tenant_a)
    key = mailbox.api_key()
    secret = WebhookSecret.objects.get(endpoint__tenant=tenant_a).plaintext()
    admin = member_of(tenant_a, "admin").user
    client = signed_in(admin)
    pages = [
        client.get(reverse("mailbox_list", args=[tenant_a.slug])).content.decode(),
        client.get(reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk])).content.decode(),
    ]
    database = all_text_in_database()
    for plaintext in (key, secret):
        assert plaintext not in database
        assert plaintext not in caplog.text
        assert all(plaintext not in page for page in pages)


def test_sealed_value_is_bound_to_its_row(tenant_a, tenant_b):
    sealed = crypto.seal("am_secret_value", aad="tenant:1:mailbox:1:api_key")
    assert crypto.unseal(sealed, aad="tenant:1:mailbox:1:api_key") == "am_secret_value"
    with pytest.raises(crypto.SecretUnreadable):
        crypto.unseal(sealed, aad="tenant:2:mailbox:1:api_key")


def test_ciphertext_copied_to_another_tenants_mailbox_does_not_open(
    tenant_a, tenant_b, mailbox_factory
):
    mine = mailbox_factory(tenant_a)
    theirs = mailbox_factory(tenant_b)
    Mailbox.objects.filter(pk=theirs.pk).update(api_key_sealed=mine.api_key_sealed)
    theirs.refresh_from_db()
    with pytest.raises(crypto.SecretUnreadable):
        theirs.api_key()


def test_rotation_reseals_everything_under_the_new_key(tenant_a, mailbox_factory, settings):
    mailbox = mailbox_factory(tenant_a)
    key = mailbox.api_key()
    old_ring = list(settings.SECRET_ENCRYPTION_KEYS)
    settings.SECRET_ENCRYPTION_KEYS = [crypto.generate_key("k2"), *old_ring]
    call_command("reencrypt_secrets")
    mailbox.refresh_from_db()
    secret = WebhookSecret.objects.get(endpoint__tenant=tenant_a)
    assert crypto.key_id_of(mailbox.api_key_sealed) == "k2"
    assert crypto.key_id_of(secret.sealed) == "k2"
    settings.SECRET_ENCRYPTION_KEYS = settings.SECRET_ENCRYPTION_KEYS[:1]
    assert mailbox.api_key() == key
    assert secret.plaintext().startswith("whsec_")


def test_rotation_leaves_an_operators_audit_row_and_a_second_run_none(
    tenant_a, mailbox_factory, settings
):
    """An outside probe: re-sealing every tenant's secrets under a new key left no row anywhere,
    unlike every other operator command that changes something."""
    from tenants.models import AuditEvent

    mailbox_factory(tenant_a)
    settings.SECRET_ENCRYPTION_KEYS = [crypto.generate_key("k2"), *settings.SECRET_ENCRYPTION_KEYS]

    call_command("reencrypt_secrets", stdout=io.StringIO())
    call_command("reencrypt_secrets", stdout=io.StringIO())

    rows = AuditEvent.objects.filter(action="secrets.resealed")
    assert list(rows.values_list("tenant", "actor", "object_type", "object_id", "data")) == [
        (
            None,
            None,
            "encryption_key",
            "k2",
            {
                "mailbox_keys": 1,
                "webhook_secrets": 1,
                "authenticator_seeds": 0,
                "sso_client_secrets": 0,
                "agent_event_endpoints": 0,
            },
        )
    ]


def test_one_process_alternating_tenants_uses_each_tenants_own_key(
    tenant_a, tenant_b, mailbox_factory, sandbox
):
    mailboxes = {"a": mailbox_factory(tenant_a), "b": mailbox_factory(tenant_b)}
    expected = []
    for n, which in enumerate("abab"):
        mailbox = mailboxes[which]
        result = provider.send_message(
            api_key=mailbox.api_key(),
            request=provider.SendRequest(
                inbox_id=mailbox.inbox_id,
                to=["c@example.com"],
                cc=[],
                bcc=[],
                subject=f"n{n}",
                text="t",
                html="",
                labels=[],
                idempotency_key=f"alt-{tenant_a.pk}-{n}",
            ),
        )
        assert result.outcome == provider.Outcome.ACCEPTED
        expected.append((mailbox.inbox_id, mailbox.provider_api_key_id))
    sends = [sandbox.ledger(idempotency_key=f"alt-{tenant_a.pk}-{n}")[0] for n in range(4)]
    assert [(s["inbox_id"], s["api_key_id"]) for s in sends] == expected


def test_the_rotations_log_line_shows_how_many_it_resealed(
    tenant_a, mailbox_factory, settings, caplog
):
    """The line read "webhook_secrets=[redacted] sso_client_secrets=[redacted]": the formatter
    hides a field named like a secret, and these fields were counts. The counts are one field."""
    import logging

    from config.logging import KeyValueFormatter

    mailbox_factory(tenant_a)
    settings.SECRET_ENCRYPTION_KEYS = [crypto.generate_key("k2"), *settings.SECRET_ENCRYPTION_KEYS]

    with caplog.at_level(logging.INFO, logger="tenants.onboarding"):
        call_command("reencrypt_secrets", stdout=io.StringIO())

    [record] = [r for r in caplog.records if r.getMessage() == "tenants.secrets.resealed"]
    line = KeyValueFormatter().format(record)
    assert "[redacted]" not in line
    assert "'mailbox_keys': 1" in line and "'webhook_secrets': 1" in line
