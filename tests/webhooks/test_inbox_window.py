"""Webhooks around a mailbox's inbox changing, against the sandbox over real HTTP: a customer's
message that AgentMail announced while its new inbox was made but not yet recorded by the
mailbox (a first provisioning, or the recovery of a deleted inbox), and a late message of the
deleted inbox arriving after its recovery.

The window is made as it happens: AgentMail creates the inbox and its answer is lost (the
sandbox's ``500_after`` on ``create_inbox``), so the mailbox stays without it until provisioning
runs again; a customer writes meanwhile and the webhook reaches our receiver."""

from __future__ import annotations

import pytest
from django.utils import timezone

from intents import errors
from intents import services as intent_services
from intents.policy import answered_message_gone
from mailboxes import provisioning, recovery
from mailboxes.models import Mailbox
from tenants.models import AuditEvent
from tests.intents.helpers import held_open
from tests.webhooks.conftest import Hook, apply_stored
from webhooks import registration, tasks
from webhooks.models import InboundMessage, WebhookEndpoint, WebhookEvent
from webhooks.services import apply, reapply
from webhooks.services.backfill import webhooks_backfill

pytestmark = pytest.mark.django_db(transaction=True)

NO_RETRY = {"max_retries": 0}
NOT_A_MAILBOX = "the event's inbox is not a mailbox of this tenant"


@pytest.fixture
def webhooks_off(sandbox, settings):
    # The webhooks reach the receiver only when a test posts them (what AgentMail sent).
    sandbox.config(webhooks_enabled=False)
    settings.WEBHOOK_BACKFILL_AFTER_SECONDS = 0
    settings.WEBHOOK_BACKFILL_CALLS_PER_SECOND = 0
    yield sandbox
    sandbox.config(webhooks_enabled=True)


def _hook(tenant) -> Hook:
    endpoint = WebhookEndpoint.objects.get(tenant=tenant)
    return Hook(endpoint, endpoint.secrets.get(retired_at=None).plaintext())


def _customer_writes(sandbox, hook, client, address: str, *, applied: bool = True) -> dict:
    """A customer's message into the inbox at ``address``, with a Reply-To, and its webhook
    as AgentMail sent it, posted to our receiver and (``applied``) applied."""
    message = sandbox.inbound(
        address,
        from_="Jane <jane@customer.test>",
        subject="Refund",
        text="Refund me",
        reply_to=["Refunds <refunds@elsewhere.test>"],
    )
    [event] = [e for e in sandbox.events() if e["event_id"] == message["event_id"]]
    hook.post(client, event["payload"], apply=applied)
    return message


def test_a_message_that_beat_a_new_mailbox_recording_its_inbox_is_recorded_once_it_does(
    webhooks_off, client, tenant_a
):
    """Rejected then ("not a mailbox of this tenant") and never looked at again: the backfill
    found the message, but from AgentMail's listing, which has no Reply-To, so the draft page
    never said where the customer asked replies to go. Recording the inbox now applies it."""
    sandbox = webhooks_off
    provisioning.tenant_connect(tenant=tenant_a)
    registration.webhook_register(tenant=tenant_a)
    hook = _hook(tenant_a)
    sandbox.fault("create_inbox", "500_after")
    with pytest.raises(provisioning.ProvisioningError):
        provisioning.mailbox_create(tenant=tenant_a, username="help")
    mailbox = Mailbox.objects.get(tenant=tenant_a, username="help")
    message = _customer_writes(sandbox, hook, client, mailbox.address)
    rejected = WebhookEvent.objects.get()
    unrecorded = mailbox.inbox_id

    provisioning.mailbox_provision(mailbox=mailbox)
    report = webhooks_backfill(tenant_id=tenant_a.pk)
    apply_stored()

    assert (unrecorded, rejected.state, rejected.outcome) == ("", "rejected", NOT_A_MAILBOX)
    recorded = InboundMessage.objects.get()
    assert (recorded.mailbox_id, recorded.message_id) == (mailbox.pk, message["message_id"])
    assert recorded.reply_to == ["refunds@elsewhere.test"]
    rejected.refresh_from_db()
    assert rejected.state == "applied"
    assert report.inbound == 0
    audit = AuditEvent.objects.get(action="webhook.events_reapplied")
    assert audit.data == {"inbox_id": mailbox.address, "webhook_event_ids": [rejected.pk]}


def _rejected_after_provisioning(sandbox, client, tenant) -> tuple[Mailbox, dict, WebhookEvent]:
    """A first provisioning whose create answer was lost, a customer's message announced
    meanwhile, and the applier's transaction that rejects its event before provisioning runs
    again and commits once provisioning (and its re-apply, which sees the event still pending)
    has finished."""
    provisioning.tenant_connect(tenant=tenant)
    registration.webhook_register(tenant=tenant)
    hook = _hook(tenant)
    sandbox.fault("create_inbox", "500_after")
    with pytest.raises(provisioning.ProvisioningError):
        provisioning.mailbox_create(tenant=tenant, username="help")
    mailbox = Mailbox.objects.get(tenant=tenant, username="help")
    message = _customer_writes(sandbox, hook, client, mailbox.address, applied=False)
    stored = WebhookEvent.objects.get()
    applier: list = []
    with held_open(lambda: apply.event_apply(event_id=stored.pk), applier):
        provisioning.mailbox_provision(mailbox=mailbox)
    assert applier == ["rejected"]
    stored.refresh_from_db()
    return mailbox, message, stored


def test_a_rejection_committed_after_the_mailbox_recorded_its_inbox_is_applied_by_the_sweep(
    webhooks_off, client, tenant_a
):
    """Found by a probe: the applier's transaction looked the mailbox up just before
    provisioning committed its inbox, and committed its rejection just after the re-apply of
    ``mailbox_provisioned`` had looked for rejected events: nothing looked at it again, so the
    customer's message (with its Reply-To) was lost unless the backfill found it, and for a
    mailbox disabled longer than WEBHOOK_BACKFILL_MAX_AGE_HOURS, or a delivery event, never.
    The sweep now re-applies such events whose inbox a mailbox has recorded since."""
    mailbox, message, stored = _rejected_after_provisioning(webhooks_off, client, tenant_a)
    missed = (stored.state, InboundMessage.objects.exists())
    swept = tasks.replay_pending()
    again = tasks.replay_pending()

    assert missed == ("rejected", False)
    assert (swept, again) == (1, 0)
    recorded = InboundMessage.objects.get()
    assert (recorded.mailbox_id, recorded.message_id) == (mailbox.pk, message["message_id"])
    assert recorded.reply_to == ["refunds@elsewhere.test"]
    stored.refresh_from_db()
    assert stored.state == "applied"
    audit = AuditEvent.objects.get(action="webhook.events_reapplied")
    assert audit.data == {"inbox_id": mailbox.address, "webhook_event_ids": [stored.pk]}


def test_two_sweeps_at_once_apply_a_rejected_event_once(webhooks_off, client, tenant_a):
    _, _, stored = _rejected_after_provisioning(webhooks_off, client, tenant_a)
    first: list = []

    with held_open(reapply.events_apply_rejected_due, first):
        beside = reapply.events_apply_rejected_due()
    after = reapply.events_apply_rejected_due()

    assert (first, beside, after) == ([1], 0, 0)
    assert InboundMessage.objects.count() == 1
    assert AuditEvent.objects.filter(action="webhook.events_reapplied").count() == 1
    stored.refresh_from_db()
    assert stored.state == "applied"


def test_a_message_that_beat_a_disabled_mailbox_recording_its_new_inbox_is_recorded(
    webhooks_off, client, tenant_a, member_of, mailbox_factory
):
    """A disabled mailbox's deleted inbox made again: the backfill left disabled mailboxes
    alone then, so the customer's message announced before the mailbox recorded its new inbox was
    lost, while one announced a moment later was recorded."""
    sandbox = webhooks_off
    mailbox = mailbox_factory(tenant_a)
    admin = member_of(tenant_a, "admin").user
    provisioning.mailbox_set_status(
        tenant=tenant_a, mailbox_id=mailbox.pk, status="disabled", actor=admin
    )
    hook = _hook(tenant_a)
    sandbox.sdk().inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)
    sandbox.fault("create_inbox", "500_after")
    with pytest.raises(provisioning.ProvisioningError):
        recovery.mailbox_inbox_recover(tenant=tenant_a, mailbox_id=mailbox.pk)
    message = _customer_writes(sandbox, hook, client, mailbox.address)
    in_window = WebhookEvent.objects.get().state

    recovered = recovery.mailbox_inbox_recover(tenant=tenant_a, mailbox_id=mailbox.pk)
    webhooks_backfill(tenant_id=tenant_a.pk)
    apply_stored()

    assert (in_window, recovered.status) == ("rejected", "disabled")
    recorded = InboundMessage.objects.get()
    assert (recorded.mailbox_id, recorded.message_id) == (mailbox.pk, message["message_id"])
    assert not answered_message_gone(recovered, recorded)


def test_a_message_that_beat_a_recovered_mailbox_recording_its_new_inbox_keeps_its_reply_to(
    webhooks_off, client, tenant_a, mailbox_factory
):
    sandbox = webhooks_off
    mailbox = mailbox_factory(tenant_a)
    hook = _hook(tenant_a)
    sandbox.sdk().inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)
    sandbox.fault("create_inbox", "500_after")
    with pytest.raises(provisioning.ProvisioningError):
        recovery.mailbox_inbox_recover(tenant=tenant_a, mailbox_id=mailbox.pk)
    message = _customer_writes(sandbox, hook, client, mailbox.address)

    recovery.mailbox_inbox_recover(tenant=tenant_a, mailbox_id=mailbox.pk)
    report = webhooks_backfill(tenant_id=tenant_a.pk)
    apply_stored()

    recorded = InboundMessage.objects.get()
    assert recorded.message_id == message["message_id"]
    assert recorded.reply_to == ["refunds@elsewhere.test"]
    assert report.inbound == 0
    assert WebhookEvent.objects.get().state == "applied"


def test_an_old_rejected_event_of_the_address_is_not_applied_when_a_mailbox_records_it(
    webhooks_off, client, tenant_a, mailbox_factory
):
    """Bounded: an event of the address rejected before the mailbox lost its inbox (here:
    before the mailbox existed) is no news of the inbox it records now."""
    sandbox = webhooks_off
    other = mailbox_factory(tenant_a)
    hook = _hook(tenant_a)
    address = other.address.replace(other.username, "later")
    tenant_a.refresh_from_db()
    sandbox.sdk().pods.inboxes.create(
        tenant_a.agentmail_pod_id, username="later", domain=address.split("@")[1]
    )
    _customer_writes(sandbox, hook, client, address)
    sandbox.sdk().inboxes.delete(address, request_options=NO_RETRY)

    mailbox_factory(tenant_a, username="later")
    apply_stored()
    swept = tasks.replay_pending()

    assert swept == 0
    assert WebhookEvent.objects.get().state == "rejected"
    assert not InboundMessage.objects.exists()


def test_a_late_message_of_the_deleted_inbox_is_recorded_but_cannot_be_answered(
    webhooks_off, client, tenant_a, member_of, mailbox_factory
):
    """The deleted inbox and the new one share the address (AgentMail's inbox id): a customer's
    message the deleted inbox got, announced only after the recovery (Svix retries for days),
    was recorded as one of the new inbox, so a reply to it was offered for approval and its send
    failed with AgentMail's 404. It is recorded (the customer did write) as of the inbox it was
    in: a reply to it is refused, as for the messages recorded before the inbox was lost."""
    sandbox = webhooks_off
    mailbox = mailbox_factory(tenant_a)
    approver = member_of(tenant_a, "approver").user
    hook = _hook(tenant_a)
    late = sandbox.inbound(mailbox.inbox_id, from_="Jane <jane@customer.test>", subject="Late")
    [event] = [e for e in sandbox.events() if e["event_id"] == late["event_id"]]
    sandbox.sdk().inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)
    recovery.mailbox_inbox_recover(tenant=tenant_a, mailbox_id=mailbox.pk)

    hook.post(client, event["payload"])
    mailbox.refresh_from_db()
    recorded = InboundMessage.objects.get()

    assert WebhookEvent.objects.get().state == "applied"
    assert recorded.received_at < mailbox.inbox_lost_at < timezone.now()
    assert answered_message_gone(mailbox, recorded)
    with pytest.raises(errors.DraftError) as refused:
        intent_services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox,
            to=["jane@customer.test"],
            subject=None,
            text="Done.",
            in_reply_to=late["message_id"],
            actor_user=approver,
        )
    assert refused.value.code == "in_reply_to_inbox_lost"


def test_a_disabled_mailboxs_events_are_applied_and_its_mail_answered_once_enabled_again(
    client, tenant_a, member_of, mailbox_row, intent_row, hook_for
):
    """Deliberate: disabling a mailbox stops its sends, not what AgentMail tells of it. A
    customer's message is recorded (nothing is lost; the mailbox enabled again answers it) and
    a bounce of a send that went out before moves its state and suppresses the address."""
    from intents.models import Suppression
    from tests.webhooks.conftest import delivery_payload, received_payload

    mailbox = mailbox_row(tenant_a)
    hook = hook_for(tenant_a)
    admin = member_of(tenant_a, "admin").user
    sent = intent_row(mailbox, to=["gone@customer.test"])
    provisioning.mailbox_set_status(
        tenant=tenant_a, mailbox_id=mailbox.pk, status="disabled", actor=admin
    )

    hook.post(client, received_payload(mailbox, thread_id="thr_d", message_id="<d@customer.test>"))
    hook.post(client, delivery_payload("bounced", sent))
    provisioning.mailbox_set_status(
        tenant=tenant_a, mailbox_id=mailbox.pk, status="active", actor=admin
    )
    draft = intent_services.draft_create(
        tenant=tenant_a,
        mailbox=mailbox,
        to=["jane@customer.test"],
        text="Done.",
        in_reply_to="<d@customer.test>",
        actor_user=admin,
    )

    assert set(WebhookEvent.objects.values_list("state", flat=True)) == {"applied"}
    assert InboundMessage.objects.get().mailbox_id == mailbox.pk
    assert Suppression.objects.filter(tenant=tenant_a, address="gone@customer.test").exists()
    assert draft.thread_id == "thr_d"
