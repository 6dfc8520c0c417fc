"""A pod or inbox deleted at AgentMail (``mailboxes.recovery``, ``manage.py agentmail_recover``):
the fault is injected by deleting it in the sandbox over its real HTTP API; the 404 is
recognised, the recovery makes it again under new client_ids, and the sends waiting for the
mailbox go out exactly once (counted in the sandbox's ledger). A recovery of something that
still exists refuses and changes nothing."""

import re
import threading
from io import StringIO

import pytest
from django.core.management import CommandError, call_command, load_command_class
from django.db import connection

from intents import sending
from intents.models import IntentEvent, SendIntent
from mailboxes import key_health, provisioning, recovery
from mailboxes.management.commands.agentmail_recover import GONE_EXIT_STATUS
from mailboxes.models import Mailbox
from tenants.models import AuditEvent, Tenant
from tests.factories import approve_new_draft
from webhooks.models import WebhookEndpoint

pytestmark = pytest.mark.django_db(transaction=True)

State = SendIntent.State
NO_RETRY = {"max_retries": 0}


@pytest.fixture
def fast_send(settings):
    settings.SEND_BACKOFF_BASE_SECONDS = 0.01
    settings.SEND_BACKOFF_CAP_SECONDS = 0.05
    settings.AGENTMAIL_READ_TIMEOUT = 1.0
    settings.SEND_LEASE_SECONDS = 5


def _work() -> list[str]:
    return sending.execute_claims(sending.intent_claim(worker="test", limit=50))


def _sent(sandbox, intent) -> int:
    return len(sandbox.ledger(idempotency_key=intent.idempotency_key))


def _recover(*args) -> str:
    out = StringIO()
    call_command("agentmail_recover", *args, stdout=out)
    return out.getvalue()


def _row(mailbox) -> dict:
    return Mailbox.objects.filter(pk=mailbox.pk).values().get()


def test_a_deleted_inbox_is_recognised_made_again_and_its_queued_reply_sent_once(
    tenant_a, member_of, mailbox_factory, sandbox, fast_send
):
    mailbox = mailbox_factory(tenant_a)
    admin, approver = member_of(tenant_a, "admin").user, member_of(tenant_a, "approver").user
    old_client_id, address = mailbox.client_id, mailbox.address
    intent = approve_new_draft(tenant_a, mailbox, approver)
    sandbox.sdk().inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)

    assert _work() == [State.QUEUED]
    assert Mailbox.objects.get(pk=mailbox.pk).key_refused
    with pytest.raises(provisioning.ProvisioningError, match="no longer has the inbox"):
        key_health.mailbox_key_check(tenant=tenant_a, mailbox_id=mailbox.pk, actor=admin)
    with pytest.raises(provisioning.ProvisioningError, match="no longer has the inbox"):
        key_health.mailbox_key_replace(tenant=tenant_a, mailbox_id=mailbox.pk, actor=admin)

    said = _recover(tenant_a.slug)

    mailbox.refresh_from_db()
    inbox = sandbox.sdk().inboxes.get(mailbox.inbox_id)
    assert f"{address}: AgentMail no longer has the inbox {address}" in said
    assert (mailbox.inbox_id, mailbox.status, mailbox.key_refused) == (address, "active", False)
    assert mailbox.client_id not in (old_client_id, None)
    assert inbox.client_id == mailbox.client_id
    assert inbox.pod_id == tenant_a.agentmail_pod_id
    audit = AuditEvent.objects.get(action="mailbox.inbox_lost")
    assert audit.data == {
        "inbox_id": address,
        "old_client_id": old_client_id,
        "client_id": mailbox.client_id,
        "needs_attention": [],
    }
    assert _work() == [State.ACCEPTED]
    assert _work() == []
    assert _sent(sandbox, intent) == 1


def test_a_send_that_may_have_left_the_deleted_inbox_goes_to_a_person_not_out_again(
    tenant_a, member_of, mailbox_factory, sandbox, fast_send
):
    """Its first call was processed and answered 500 (uncertain); the inbox, with the sent
    message that would have told, is deleted. Replaying it from the new inbox could send it a
    second time: a person decides."""
    mailbox = mailbox_factory(tenant_a)
    intent = approve_new_draft(tenant_a, mailbox, member_of(tenant_a, "approver").user)
    sandbox.fault("send", "500_after")
    assert _work() == [State.UNCERTAIN]
    sandbox.sdk().inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)

    recovery.mailbox_inbox_recover(tenant=tenant_a, mailbox_id=mailbox.pk)

    intent.refresh_from_db()
    assert (intent.state, intent.last_error_code) == (State.NEEDS_ATTENTION, "inbox_lost")
    event = IntentEvent.objects.filter(intent=intent).latest("pk")
    assert (event.action, event.from_state, event.to_state) == (
        "intent.needs_attention",
        State.UNCERTAIN,
        State.NEEDS_ATTENTION,
    )
    assert AuditEvent.objects.get(action="mailbox.inbox_lost").data["needs_attention"] == [
        intent.pk
    ]
    assert _work() == []
    assert _sent(sandbox, intent) == 1


def test_a_deleted_pod_is_recognised_and_made_again_with_its_inboxes_and_webhook(
    tenant_a, member_of, mailbox_factory, sandbox, fast_send
):
    first, second = mailbox_factory(tenant_a), mailbox_factory(tenant_a)
    approver = member_of(tenant_a, "approver").user
    intents = [approve_new_draft(tenant_a, m, approver) for m in (first, second)]
    tenant_a.refresh_from_db()
    old_pod, old_pod_client_id = tenant_a.agentmail_pod_id, tenant_a.pod_client_id
    endpoint = WebhookEndpoint.objects.get(tenant=tenant_a)
    old_hook_client_id = endpoint.client_id
    client = sandbox.sdk()
    for mailbox in (first, second):
        client.inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)
    client.pods.delete(old_pod, request_options=NO_RETRY)

    with pytest.raises(provisioning.ProvisioningError, match="no longer has the pod"):
        provisioning.mailbox_create(tenant=tenant_a, username="late")
    with pytest.raises(CommandError, match="no longer has the pod"):
        _recover(tenant_a.slug, "--mailbox", first.address)
    said = _recover(tenant_a.slug)

    tenant_a.refresh_from_db()
    new_pod = tenant_a.agentmail_pod_id
    assert f"{tenant_a.slug}: AgentMail no longer has the pod {old_pod}" in said
    assert new_pod not in ("", old_pod)
    assert tenant_a.pod_client_id != old_pod_client_id
    assert client.pods.get(new_pod).client_id == tenant_a.pod_client_id
    rows = Mailbox.objects.filter(tenant=tenant_a).order_by("pk")
    assert [(m.status, client.inboxes.get(m.inbox_id).pod_id) for m in rows] == [
        ("active", new_pod)
    ] * 3
    endpoint.refresh_from_db()
    hooks = client.pods.webhooks.list(new_pod).webhooks
    assert endpoint.client_id != old_hook_client_id
    assert [(h.webhook_id, h.client_id) for h in hooks] == [
        (endpoint.provider_webhook_id, endpoint.client_id)
    ]
    assert endpoint.status == WebhookEndpoint.Status.ACTIVE
    assert sorted(_work()) == [State.ACCEPTED, State.ACCEPTED]
    assert [_sent(sandbox, i) for i in intents] == [1, 1]
    assert AuditEvent.objects.filter(action="tenant.pod_lost").count() == 1


def test_a_recovery_that_stopped_half_way_is_finished_by_running_it_again(
    tenant_a, member_of, mailbox_factory, sandbox, fast_send
):
    mailbox = mailbox_factory(tenant_a)
    intent = approve_new_draft(tenant_a, mailbox, member_of(tenant_a, "approver").user)
    sandbox.sdk().inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)
    sandbox.fault("create_inbox", "500_before")

    with pytest.raises(CommandError, match="500"):
        _recover(tenant_a.slug)
    half = _row(mailbox)
    assert (half["inbox_id"], half["status"]) == ("", "provisioning")
    assert _work() == []
    said = _recover(tenant_a.slug)

    mailbox.refresh_from_db()
    assert "its inbox is being made again (unfinished)" in said
    assert mailbox.client_id == half["agentmail_client_id"]
    assert (mailbox.status, mailbox.key_refused) == ("active", False)
    assert sandbox.sdk().inboxes.get(mailbox.inbox_id).client_id == mailbox.client_id
    assert AuditEvent.objects.filter(action="mailbox.inbox_lost").count() == 1
    assert _work() == [State.ACCEPTED]
    assert _sent(sandbox, intent) == 1


def test_a_recovery_of_what_agentmail_still_has_refuses_and_changes_nothing(
    tenant_a, member_of, mailbox_factory, sandbox
):
    mailbox = mailbox_factory(tenant_a)
    before, tenant_before = _row(mailbox), Tenant.objects.filter(pk=tenant_a.pk).values().get()
    audits, creates = AuditEvent.objects.count(), len(sandbox.requests(method="POST"))

    with pytest.raises(CommandError, match="still has the pod and every inbox"):
        _recover(tenant_a.slug)
    with pytest.raises(CommandError, match="still has the inbox"):
        _recover(tenant_a.slug, "--mailbox", mailbox.address)
    with pytest.raises(provisioning.ProvisioningError, match="still has the inbox"):
        recovery.mailbox_inbox_recover(
            tenant=tenant_a, mailbox_id=mailbox.pk, actor=member_of(tenant_a, "admin").user
        )
    with pytest.raises(provisioning.ProvisioningError, match="still has the pod"):
        recovery.tenant_pod_recover(tenant=tenant_a)

    assert _row(mailbox) == before
    assert Tenant.objects.filter(pk=tenant_a.pk).values().get() == tenant_before
    assert AuditEvent.objects.count() == audits
    assert len(sandbox.requests(method="POST")) == creates


@pytest.mark.parametrize("mode", ["500_before", "503_before", "429"])
def test_an_answer_that_is_not_agentmails_404_changes_nothing(
    tenant_a, mailbox_factory, sandbox, mode
):
    mailbox = mailbox_factory(tenant_a)
    sandbox.sdk().inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)
    before = _row(mailbox)
    sandbox.fault("get_inbox", mode)

    with pytest.raises(CommandError, match="only its 404 counts as gone"):
        _recover(tenant_a.slug)

    assert _row(mailbox) == before
    assert not AuditEvent.objects.filter(action="mailbox.inbox_lost").exists()


def _check_from_the_command_line(*args) -> int:
    """``manage.py agentmail_recover ... --check`` as a monitor runs it: Django's own
    ``run_from_argv``, which turns a CommandError into the process's exit status."""
    command = load_command_class("mailboxes", "agentmail_recover")
    try:
        command.run_from_argv(["manage.py", "agentmail_recover", *args, "--check"])
    except SystemExit as stopped:
        return stopped.code
    return 0


def test_check_says_what_is_gone_with_its_own_exit_status_and_changes_nothing(
    tenant_a, mailbox_factory, sandbox, capsys
):
    """A monitor runs --check: it said nothing was gone with exit status 1 (a CommandError)
    and something was gone with 0, so an alert fired while all was well and stayed quiet
    while an inbox was gone."""
    mailbox = mailbox_factory(tenant_a)
    sandbox.sdk().inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)
    before = _row(mailbox)

    status = _check_from_the_command_line(tenant_a.slug)

    said = capsys.readouterr()
    assert status == GONE_EXIT_STATUS != 1
    assert said.out == f"{mailbox.address}: AgentMail no longer has the inbox {mailbox.inbox_id}\n"
    assert "run it without --check to make it again" in said.err
    assert _row(mailbox) == before
    with pytest.raises(CommandError) as gone:
        _recover(tenant_a.slug, "--check", "--mailbox", mailbox.address)
    assert gone.value.returncode == GONE_EXIT_STATUS
    assert _row(mailbox) == before


def test_check_of_what_agentmail_still_has_says_so_and_exits_0(
    tenant_a, mailbox_factory, sandbox, capsys
):
    mailbox = mailbox_factory(tenant_a)
    before = _row(mailbox)

    statuses = [
        _check_from_the_command_line(tenant_a.slug),
        _check_from_the_command_line(tenant_a.slug, "--mailbox", mailbox.address),
    ]

    said = capsys.readouterr()
    assert statuses == [0, 0]
    assert said.out == (
        f"AgentMail still has the pod and every inbox of {tenant_a.slug}: nothing is gone\n"
        f"AgentMail still has the inbox {mailbox.inbox_id}: nothing is gone\n"
    )
    assert said.err == ""
    assert _row(mailbox) == before


def test_check_that_cannot_tell_exits_1_not_as_gone_nor_as_fine(
    tenant_a, mailbox_factory, sandbox, capsys
):
    mailbox = mailbox_factory(tenant_a)
    sandbox.sdk().inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)
    sandbox.fault("get_inbox", "503_before")

    status = _check_from_the_command_line(tenant_a.slug)

    assert status == 1
    assert "only its 404 counts as gone" in capsys.readouterr().err


def test_a_disabled_mailbox_gets_its_inbox_again_and_stays_disabled(
    tenant_a, member_of, mailbox_factory, sandbox
):
    mailbox = mailbox_factory(tenant_a)
    admin = member_of(tenant_a, "admin").user
    provisioning.mailbox_set_status(
        tenant=tenant_a, mailbox_id=mailbox.pk, status="disabled", actor=admin
    )
    sandbox.sdk().inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)

    recovered = recovery.mailbox_inbox_recover(tenant=tenant_a, mailbox_id=mailbox.pk, actor=admin)

    assert (recovered.status, bool(recovered.api_key_sealed)) == ("disabled", True)
    assert sandbox.sdk().inboxes.get(recovered.inbox_id).client_id == recovered.client_id


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["nobody"], "no tenant has the slug 'nobody'"),
        (["{slug}", "--mailbox", "ghost@example.com"], "--mailbox: {slug} has no mailbox"),
    ],
)
def test_bad_input_is_refused_precisely(tenant_a, args, error):
    args = [a.format(slug=tenant_a.slug) for a in args]

    with pytest.raises(CommandError, match=error.format(slug=tenant_a.slug)):
        _recover(*args)


def test_help_states_every_options_default(capsys):
    with pytest.raises(SystemExit):
        call_command("agentmail_recover", "--help")

    said = " ".join(capsys.readouterr().out.split())
    assert "(default: the tenant's pod with every inbox if the pod is gone" in said
    assert "(default: off, make it again)" in said


def test_two_recoveries_at_once_make_one_inbox(tenant_a, mailbox_factory, sandbox):
    mailbox = mailbox_factory(tenant_a)
    sandbox.sdk().inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)
    start, outcomes = threading.Barrier(2), []

    def recover():
        start.wait()
        try:
            recovery.mailbox_inbox_recover(tenant=tenant_a, mailbox_id=mailbox.pk)
            outcomes.append("made")
        except provisioning.ProvisioningError as error:
            outcomes.append(error.message)
        finally:
            connection.close()

    threads = [threading.Thread(target=recover) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    mailbox.refresh_from_db()
    # The other one found the lease taken, or the inbox made again already.
    assert set(outcomes) <= {
        "made",
        "Provisioning of this item is already running; try again shortly.",
        f"AgentMail still has the inbox {mailbox.address}: there is nothing to make again, and "
        "nothing changed.",
    }
    assert "made" in outcomes
    assert AuditEvent.objects.filter(action="mailbox.inbox_lost").count() == 1
    assert mailbox.is_active and not mailbox.key_refused
    assert sandbox.sdk().inboxes.get(mailbox.inbox_id).client_id == mailbox.client_id


def test_a_send_on_its_way_stops_the_recovery_until_it_is_recorded(
    tenant_a, member_of, mailbox_factory, sandbox, fast_send
):
    mailbox = mailbox_factory(tenant_a)
    intent = approve_new_draft(tenant_a, mailbox, member_of(tenant_a, "approver").user)
    claims = sending.intent_claim(worker="slow", limit=1)
    sandbox.sdk().inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)
    before = _row(mailbox)

    with pytest.raises(CommandError, match=r"1 send of .* is on its way to AgentMail"):
        _recover(tenant_a.slug)
    assert _row(mailbox) == before
    assert SendIntent.objects.get(pk=intent.pk).state == State.SENDING
    assert sending.execute_claims(claims) == [State.QUEUED]
    _recover(tenant_a.slug)

    assert _work() == [State.ACCEPTED]
    assert _sent(sandbox, intent) == 1


def test_a_queued_reply_to_a_message_of_the_deleted_inbox_fails_and_nothing_goes_out(
    tenant_a, member_of, mailbox_factory, sandbox, fast_send
):
    """AgentMail no longer has the message it answers: the reply route's 404 is the request's,
    not the key's (a failed send, its answer on its page), and nothing is sent from the new
    inbox in its place (DEPLOYMENT.md: a new message is a new draft and approval)."""
    from django.utils import timezone

    from webhooks.models import InboundMessage

    mailbox = mailbox_factory(tenant_a)
    kenji = sandbox.inbound(
        mailbox.inbox_id, from_="Kenji <kenji@example.com>", subject="Order", text="Where?"
    )
    InboundMessage.objects.create(
        tenant=tenant_a,
        mailbox=mailbox,
        thread_id=kenji["thread_id"],
        message_id=kenji["message_id"],
        sender="customer",
        subject="Order",
        received_at=timezone.now(),
    )
    intent = approve_new_draft(
        tenant_a,
        mailbox,
        member_of(tenant_a, "approver").user,
        to=["kenji@example.com"],
        subject=None,
        in_reply_to=kenji["message_id"],
    )
    sandbox.sdk().inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)
    assert _work() == [State.QUEUED]

    _recover(tenant_a.slug)

    assert _work() == [State.FAILED]
    intent.refresh_from_db()
    assert intent.last_error_code == "not_found"
    assert _sent(sandbox, intent) == 0
    assert sandbox.ledger(inbox_id=mailbox.inbox_id) == []


def test_a_pending_reply_to_a_message_of_the_deleted_inbox_is_not_offered_for_approval(
    tenant_a, member_of, mailbox_factory, sandbox, fast_send, client
):
    """The customer's message went with the deleted inbox (the new one, at the same address,
    starts empty). Reviewer's page said the draft answers it, as before; the approval went
    through and its send failed with AgentMail's 404, the customer answered by nobody. The page
    says the reply cannot go out in that thread, the approval is refused and nothing is queued;
    an agent may not start another reply to that message; a message of the new inbox is
    answered, once."""
    from django.urls import reverse

    from intents.models import Draft
    from tests.review.threads import agent_drafts, agent_token, customer_writes
    from tests.webhooks.conftest import Hook

    mailbox = mailbox_factory(tenant_a)
    endpoint = WebhookEndpoint.objects.get(tenant=tenant_a)
    hook = Hook(endpoint, endpoint.secrets.get(retired_at=None).plaintext())
    admin = member_of(tenant_a, "admin").user
    token = agent_token(tenant_a, admin)
    ana = customer_writes(sandbox, hook, client, mailbox, "Ana <ana@customer.test>", "Refund 4711")
    reply = {"mailbox": mailbox.address, "to": ["ana@customer.test"], "text": "Refunded."}
    pending = agent_drafts(client, token, "before", {**reply, "in_reply_to": ana["message_id"]})
    sandbox.sdk().inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)
    _recover(tenant_a.slug)
    client.force_login(admin, backend="django.contrib.auth.backends.ModelBackend")
    page = client.get(reverse("draft", args=[tenant_a.slug, pending["id"]])).content.decode()
    version = Draft.objects.get(pk=pending["id"]).versions.get()

    refused = client.post(
        reverse("draft_approve", args=[tenant_a.slug, pending["id"]]),
        {"version": 1, "content_hash": version.content_hash},
    )
    again = client.post(
        "/api/v1/drafts",
        data={**reply, "in_reply_to": ana["message_id"]},
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "after"},
    )

    assert 'data-thread-warning="answered_message_gone"' in page
    assert re.search(r"<button[^>]* data-approve [^>]*disabled", page)
    assert refused.status_code == 409
    assert "AgentMail no longer has it" in refused.content.decode()
    assert Draft.objects.get(pk=pending["id"]).status == Draft.Status.PENDING
    assert not SendIntent.objects.exists()
    assert (again.status_code, again.json()["code"]) == (422, "in_reply_to_inbox_lost")
    ben = customer_writes(sandbox, hook, client, mailbox, "Ben <ben@customer.test>", "Hours?")
    fresh = agent_drafts(
        client,
        token,
        "new",
        {**reply, "to": ["ben@customer.test"], "in_reply_to": ben["message_id"]},
    )
    version = Draft.objects.get(pk=fresh["id"]).versions.get()
    approved = client.post(
        reverse("draft_approve", args=[tenant_a.slug, fresh["id"]]),
        {"version": 1, "content_hash": version.content_hash},
    )
    assert approved.status_code in (200, 302)
    intent = SendIntent.objects.get()
    assert _work() == [State.ACCEPTED]
    assert _sent(sandbox, intent) == 1


def test_a_mailbox_that_never_had_an_inbox_is_named_so_not_said_to_be_at_agentmail(
    tenant_a, mailbox_factory, sandbox
):
    """Its provisioning failed before AgentMail made the inbox: the command said "AgentMail
    still has the inbox : there is nothing to make again", naming an empty id, of an inbox
    that never existed, and not the way on (retry its provisioning)."""
    mailbox_factory(tenant_a)
    sandbox.fault("create_inbox", "500_before")
    with pytest.raises(provisioning.ProvisioningError):
        provisioning.mailbox_create(tenant=tenant_a, username="half")
    half = Mailbox.objects.get(tenant=tenant_a, username="half")
    before = _row(half)

    with pytest.raises(CommandError) as refused:
        _recover(tenant_a.slug, "--mailbox", half.address)

    assert str(refused.value) == (
        f"{half.address} has no inbox to make again: retry its provisioning instead."
    )
    assert _row(half) == before


def test_a_tenant_that_never_had_a_pod_is_named_so_not_said_to_be_at_agentmail(tenant_a):
    """No mailbox yet, so no pod was ever made: the command said "AgentMail still has the pod
    and every inbox of tenant-a", of a pod that never existed."""
    before = Tenant.objects.filter(pk=tenant_a.pk).values().get()

    with pytest.raises(CommandError) as refused:
        _recover(tenant_a.slug)
    checked = _recover(tenant_a.slug, "--check")

    assert str(refused.value) == (
        "tenant-a has no AgentMail pod yet: it is made with its first mailbox, so there is "
        "nothing to make again, and nothing changed"
    )
    assert checked == (
        "tenant-a has no AgentMail pod yet: it is made with its first mailbox, so nothing is gone\n"
    )
    assert Tenant.objects.filter(pk=tenant_a.pk).values().get() == before


def test_the_reason_a_recovery_gives_a_person_reads_as_the_systems_in_the_readers_language(
    tenant_a, member_of, mailbox_factory, sandbox, fast_send, signed_in
):
    """The admin's "Make the inbox again" hands an uncertain send to a person with the
    system's fixed reason on a row that is the admin's: the audit page showed it in English,
    set apart as if the admin had written it. It is the system's sentence, in German here."""
    from django.urls import reverse
    from django.utils import translation

    from intents.reason_words import SYSTEM_REASONS
    from intents.sending.inbox_lost import INBOX_LOST_REASON

    admin = member_of(tenant_a, "admin").user
    mailbox = mailbox_factory(tenant_a)
    approve_new_draft(tenant_a, mailbox, member_of(tenant_a, "approver").user)
    sandbox.fault("send", "500_after")
    assert _work() == [State.UNCERTAIN]
    sandbox.sdk().inboxes.delete(mailbox.inbox_id, request_options=NO_RETRY)
    recovery.mailbox_inbox_recover(tenant=tenant_a, mailbox_id=mailbox.pk, actor=admin)
    assert IntentEvent.objects.get(reason=INBOX_LOST_REASON).actor_user == admin
    admin.language = "de"
    admin.save(update_fields=["language"])

    page = signed_in(admin).get(reverse("admin_audit", args=[tenant_a.slug])).content.decode()

    with translation.override("de"):
        words = str(SYSTEM_REASONS[INBOX_LOST_REASON])
    assert words != INBOX_LOST_REASON and words in page
    assert f">{INBOX_LOST_REASON}<" not in page
