"""A renamed mailbox is sent under its new name: the rename reaches AgentMail after the commit
(mailboxes.display_names), a failed call is retried by the sweep, a rename during a sync in flight
ends with the latest name, and nobody outside the tenant can rename or wake anything.

Everything goes to the sandbox AgentMail over real HTTP; the django-q2 tasks are called as the
cluster would call them.
"""

from __future__ import annotations

import importlib
import logging
import threading
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connections
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone
from django_q.models import OrmQ

from intents import sending
from intents import services as intent_services
from mailboxes import display_names, provisioning, tasks
from mailboxes.models import Mailbox
from tests.factories import make_local_mailbox
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db

SYNC_TASK = "mailboxes.tasks.sync_display_name"


def rename(mailbox, name, actor):
    return provisioning.mailbox_update_policy(
        tenant=mailbox.tenant,
        mailbox_id=mailbox.pk,
        policy_mode="open",
        allowed_domains=[],
        allowed_addresses=[],
        display_name=name,
        actor=actor,
    )


def patches(sandbox, mailbox):
    """The inbox updates the sandbox answered for this mailbox, oldest first: (status, fault)."""
    return [
        (r["status"], r["fault"])
        for r in sandbox.requests(route="update_inbox")
        if r["path"].endswith("/" + mailbox.inbox_id)
    ]


def queued_syncs():
    return [task.args() for task in OrmQ.objects.all() if task.func() == SYNC_TASK]


def name_at_agentmail(sandbox, mailbox):
    return sandbox.sdk().inboxes.get(mailbox.inbox_id).display_name


def send_reply(sandbox, mailbox, approver):
    """A customer writes to the mailbox; a person approves a reply and the worker sends it. The
    sandbox's ledger entry of that reply."""
    received = sandbox.inbound(
        mailbox.inbox_id, from_="Jane <jane@customer.test>", subject="Invoice?", text="Hi"
    )
    InboundMessage.objects.create(
        tenant=mailbox.tenant,
        mailbox=mailbox,
        thread_id=received["thread_id"],
        message_id=received["message_id"],
        sender="Jane <jane@customer.test>",
        subject="Invoice?",
        received_at=timezone.now() - timedelta(minutes=1),
    )
    draft = intent_services.draft_create(
        tenant=mailbox.tenant,
        mailbox=mailbox,
        to=["jane@customer.test"],
        text="Here it is.",
        in_reply_to=received["message_id"],
        thread_id=received["thread_id"],
        actor_user=approver,
    )
    intent = intent_services.draft_approve(
        tenant=mailbox.tenant,
        draft_id=draft.pk,
        version=1,
        content_hash=draft.versions.get().content_hash,
        actor=approver,
    )
    sending.run_once(intent_id=intent.pk)
    intent.refresh_from_db()
    return sandbox.ledger(idempotency_key=intent.idempotency_key)


def test_a_rename_reaches_agentmail_and_the_next_reply_carries_the_new_name(
    tenant_a, member_of, mailbox_factory, sandbox, django_capture_on_commit_callbacks
):
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    mailbox = mailbox_factory(tenant_a, display_name="Acme Support")
    with django_capture_on_commit_callbacks(execute=True):
        rename(mailbox, "Acme Billing", admin)
    woken = queued_syncs()

    applied = tasks.sync_display_name(*woken[0])
    mailbox.refresh_from_db()
    sends = send_reply(sandbox, mailbox, approver)

    assert woken == [(mailbox.pk,)]
    assert applied is True
    assert patches(sandbox, mailbox) == [(200, None)]
    assert name_at_agentmail(sandbox, mailbox) == "Acme Billing"
    assert (mailbox.provider_display_name, mailbox.display_name_pending) == ("Acme Billing", False)
    assert [(s["route"], s["from"]) for s in sends] == [
        ("reply", f"Acme Billing <{mailbox.address}>")
    ]


def test_a_failed_update_stays_pending_and_the_sweep_applies_it_once(
    tenant_a, member_of, mailbox_factory, sandbox, caplog
):
    admin = member_of(tenant_a, "admin").user
    mailbox = mailbox_factory(tenant_a, display_name="Acme Support")
    rename(mailbox, "Acme Billing", admin)
    sandbox.fault("update_inbox", "503_before", inbox_id=mailbox.inbox_id)

    with caplog.at_level(logging.WARNING, logger="mailboxes.display_names"):
        woken = tasks.sync_display_name(mailbox.pk)
    failed = Mailbox.objects.get(pk=mailbox.pk)
    early = tasks.sync_display_names()
    Mailbox.objects.filter(pk=mailbox.pk).update(display_name_sync_not_before=Now())
    swept = tasks.sync_display_names()
    again = tasks.sync_display_names()
    mailbox.refresh_from_db()

    assert woken is False
    assert (failed.display_name_pending, failed.provider_display_name) == (True, "Acme Support")
    assert failed.display_name_sync_failures == 1
    assert failed.display_name_sync_token is None
    assert failed.display_name_sync_not_before > timezone.now() + timedelta(seconds=10)
    assert (early, swept, again) == (0, 1, 0)
    assert patches(sandbox, mailbox) == [(503, "503_before"), (200, None)]
    assert name_at_agentmail(sandbox, mailbox) == "Acme Billing"
    assert (mailbox.display_name_pending, mailbox.display_name_sync_failures) == (False, 0)
    [warning] = [r for r in caplog.records if r.msg == "mailboxes.display_name.sync_failed"]
    assert (warning.levelname, warning.status, warning.mailbox_id) == ("WARNING", 503, mailbox.pk)
    assert mailbox.api_key() not in caplog.text


@pytest.mark.django_db(transaction=True)
def test_a_rename_during_a_sync_in_flight_ends_with_the_latest_name_at_agentmail(
    tenant_a, member_of, mailbox_factory, sandbox
):
    admin = member_of(tenant_a, "admin").user
    mailbox = mailbox_factory(tenant_a, display_name="Acme Support")
    rename(mailbox, "Acme Billing", admin)
    # The first call reaches AgentMail and is answered a while later.
    sandbox.fault("update_inbox", "delay", delay=1.5, inbox_id=mailbox.inbox_id)
    first: list[bool] = []

    def first_run():
        try:
            first.append(display_names.mailbox_sync_display_name(mailbox_id=mailbox.pk))
        finally:
            connections.close_all()

    thread = threading.Thread(target=first_run)
    thread.start()
    sandbox.wait_for(lambda: sandbox.faults()[0]["fired"] == 1)
    rename(mailbox, "Acme Accounts", admin)
    second = tasks.sync_display_name(mailbox.pk)
    thread.join(30)
    mailbox.refresh_from_db()

    assert (first, second) == ([True], False)
    assert patches(sandbox, mailbox) == [(200, "delay"), (200, None)]
    assert name_at_agentmail(sandbox, mailbox) == "Acme Accounts"
    assert (mailbox.provider_display_name, mailbox.display_name_sync_token) == (
        "Acme Accounts",
        None,
    )


def test_another_tenants_admin_can_neither_rename_nor_wake_a_sync(
    tenant_a,
    tenant_b,
    member_of,
    signed_in,
    mailbox_factory,
    sandbox,
    django_capture_on_commit_callbacks,
):
    mailbox = mailbox_factory(tenant_a, display_name="Acme Support")
    outsider = member_of(tenant_b, "admin").user
    client = signed_in(outsider)
    form = {"display_name": "Hijacked", "policy_mode": "open", "based_on": ""}

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        through_own_tenant = client.post(
            reverse("mailbox_policy", args=[tenant_b.slug, mailbox.pk]), form
        )
        through_theirs = client.post(
            reverse("mailbox_policy", args=[tenant_a.slug, mailbox.pk]), form
        )
        with pytest.raises(Mailbox.DoesNotExist):
            provisioning.mailbox_update_policy(
                tenant=tenant_b,
                mailbox_id=mailbox.pk,
                policy_mode="open",
                allowed_domains=[],
                allowed_addresses=[],
                display_name="Hijacked",
                actor=outsider,
            )
    swept = tasks.sync_display_names()
    mailbox.refresh_from_db()

    assert through_own_tenant.status_code == 404
    assert through_theirs.status_code in (403, 404)
    assert (callbacks, queued_syncs(), swept) == ([], [], 0)
    assert (mailbox.display_name, mailbox.display_name_pending) == ("Acme Support", False)
    assert patches(sandbox, mailbox) == []
    assert name_at_agentmail(sandbox, mailbox) == "Acme Support"


def test_the_update_goes_through_the_tenants_pod_and_cannot_rename_another_tenants_inbox(
    tenant_a, tenant_b, member_of, mailbox_factory, sandbox
):
    """A mailbox row that named another tenant's inbox (a corrupted mapping) cannot rename it:
    the call names the tenant's own pod, and AgentMail refuses an inbox outside it."""
    ours = mailbox_factory(tenant_a, display_name="Acme Support")
    theirs = mailbox_factory(tenant_b, display_name="Globex Help")
    Mailbox.objects.filter(pk=ours.pk).update(inbox_id=theirs.inbox_id)
    ours.refresh_from_db()
    rename(ours, "Hijacked", member_of(tenant_a, "admin").user)

    applied = tasks.sync_display_name(ours.pk)
    ours.refresh_from_db()

    assert applied is False
    assert patches(sandbox, theirs) == [(404, None)]
    assert name_at_agentmail(sandbox, theirs) == "Globex Help"
    assert ours.display_name_pending
    # A refused request waits the longest backoff, not a minute.
    assert ours.display_name_sync_not_before > timezone.now() + timedelta(minutes=30)


def test_provisioning_records_the_name_agentmail_reports_not_the_one_asked_for(
    tenant_a, member_of, mailbox_factory, sandbox
):
    """A repeated create answers with the inbox as first created: a mailbox renamed while its
    provisioning was unfinished is still sent under its first name until the sync runs."""
    admin = member_of(tenant_a, "admin").user
    mailbox = mailbox_factory(tenant_a, display_name="Acme Support")
    created_as = mailbox.provider_display_name
    Mailbox.objects.filter(pk=mailbox.pk).update(
        api_key_sealed="", provider_api_key_id="", status=Mailbox.Status.PROVISIONING
    )
    rename(mailbox, "Acme Billing", admin)

    provisioned = provisioning.mailbox_provision(mailbox=Mailbox.objects.get(pk=mailbox.pk))
    woken = queued_syncs()
    tasks.sync_display_name(mailbox.pk)
    mailbox.refresh_from_db()

    assert created_as == "Acme Support"
    assert provisioned.status == Mailbox.Status.ACTIVE
    assert (provisioned.provider_display_name, provisioned.display_name_pending) == (
        "Acme Support",
        True,
    )
    assert woken == [(mailbox.pk,)]
    assert (mailbox.provider_display_name, name_at_agentmail(sandbox, mailbox)) == (
        "Acme Billing",
        "Acme Billing",
    )


def test_the_sweep_takes_at_most_its_limit_per_run(tenant_a, member_of, mailbox_factory, sandbox):
    admin = member_of(tenant_a, "admin").user
    first = mailbox_factory(tenant_a, display_name="One")
    second = mailbox_factory(tenant_a, display_name="Two")
    rename(first, "One renamed", admin)
    rename(second, "Two renamed", admin)

    counts = [display_names.mailboxes_sync_display_names(limit=1) for _ in range(3)]

    assert counts == [1, 1, 0]
    assert (patches(sandbox, first), patches(sandbox, second)) == ([(200, None)], [(200, None)])


def test_existing_mailboxes_are_recorded_under_the_name_agentmail_was_given(tenant_a, member_of):
    """The data migration: renames never reached AgentMail before, so a renamed mailbox is still
    sent under its first name, and one never renamed under its own."""
    admin = member_of(tenant_a, "admin").user
    kept = make_local_mailbox(tenant_a, username="kept", display_name="Acme Help")
    renamed = make_local_mailbox(tenant_a, username="renamed", display_name="Acme Support")
    rename(renamed, "Acme Billing", admin)
    rename(renamed, "Acme Accounts", admin)
    rename(kept, "Acme Help", admin)
    Mailbox.objects.update(provider_display_name="")
    migration = importlib.import_module(
        "mailboxes.migrations.0006_provider_display_name_of_existing_mailboxes"
    )

    migration.record_provider_display_names(apps, None)

    assert dict(Mailbox.objects.values_list("username", "provider_display_name")) == {
        "kept": "Acme Help",
        "renamed": "Acme Support",
    }
    assert Mailbox.objects.get(pk=renamed.pk).display_name_pending
