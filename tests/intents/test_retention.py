import threading
import time
from datetime import timedelta

import pytest
from django.db import connections, transaction
from django.utils import timezone

from intents import errors, services, tasks
from intents.models import (
    AgentEvent,
    AgentEventDelivery,
    Draft,
    DraftNote,
    DraftVersion,
    IntentEvent,
    SendIntent,
)
from intents.retention import draft_bodies_purge
from intents.services.event_endpoints import endpoint_create
from tests.intents.helpers import blocked_on_a_lock, in_thread, until_done_or_waiting

pytestmark = pytest.mark.django_db


@pytest.fixture
def decided(tenant_a, member_of, mailbox_factory):
    """make(status) -> a draft in that status, decided `days` ago."""
    approver = member_of(tenant_a, "approver").user
    mailbox = mailbox_factory(tenant_a)

    def make(*, days: int, approve: bool = False, intent_state: str = "accepted"):
        draft = services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox,
            to=["c@example.com"],
            subject="Re: order",
            text="private body",
            html="<p>private body</p>",
            actor_user=approver,
        )
        if approve:
            version = draft.versions.get()
            intent = services.draft_approve(
                tenant=tenant_a,
                draft_id=draft.pk,
                version=1,
                content_hash=version.content_hash,
                actor=approver,
            )
            SendIntent.objects.filter(pk=intent.pk).update(
                state=intent_state, provider_message_id="<m@x>"
            )
        else:
            services.draft_reject(tenant=tenant_a, draft_id=draft.pk, reason="no", actor=approver)
        long_ago = timezone.now() - timedelta(days=days)
        Draft.objects.filter(pk=draft.pk).update(updated_at=long_ago)
        # Its send, too, last changed then (the retention counts from the later of the two).
        SendIntent.objects.filter(draft=draft).update(updated_at=long_ago)
        return draft

    return make


def test_bodies_past_retention_are_purged_and_the_record_stays(decided, tenant_a):
    old = decided(days=91)
    fresh = decided(days=10)
    assert draft_bodies_purge() == 1
    purged = DraftVersion.objects.get(draft=old)
    kept = DraftVersion.objects.get(draft=fresh)
    assert (purged.text, purged.html) == ("", "")
    assert purged.body_purged_at is not None
    assert purged.subject == "Re: order" and purged.to == ["c@example.com"] and purged.content_hash
    assert kept.text == "private body"
    assert IntentEvent.objects.filter(draft=old, action="draft.bodies_purged").count() == 1


def test_an_open_send_keeps_its_body(decided):
    waiting = decided(days=200, approve=True, intent_state="needs_attention")
    sent = decided(days=200, approve=True, intent_state="accepted")
    assert tasks.retention_purge() == 1
    assert DraftVersion.objects.get(draft=waiting).text == "private body"
    assert DraftVersion.objects.get(draft=sent).text == ""


def test_each_tenant_has_its_own_retention(decided, tenant_a):
    tenant_a.retention_days = 365
    tenant_a.save(update_fields=["retention_days"])
    decided(days=200)
    assert draft_bodies_purge() == 0


def test_agent_events_go_with_the_bodies_once_delivered(decided, tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.rejected"], actor=admin
    )
    old, still_sending, fresh = decided(days=91), decided(days=92), decided(days=10)
    AgentEventDelivery.objects.exclude(event__draft=still_sending).update(status="delivered")

    draft_bodies_purge()

    assert sorted(AgentEvent.objects.values_list("draft_id", flat=True)) == sorted(
        [still_sending.pk, fresh.pk]
    )
    assert old.pk not in AgentEventDelivery.objects.values_list("event__draft_id", flat=True)

    # The one still being attempted (its endpoint disabled for months, say) goes once it ends:
    # its draft was purged above and is not looked at again by that pass.
    AgentEventDelivery.objects.update(status="failed")
    tasks.retention_purge()
    assert list(AgentEvent.objects.values_list("draft_id", flat=True)) == [fresh.pk]


def test_finished_broadcasts_lose_their_bodies_and_values_past_retention(
    tenant_a, member_of, mailbox_factory, signed_in
):
    """A broadcast's text and each recipient's values (names, order numbers) are customers'
    data like a draft's body; the subject template, the addresses, the hashes and the journal
    stay. One still in review keeps everything, and so does one finished recently."""
    from intents.models import Broadcast, BroadcastRecipient
    from intents.retention import broadcast_bodies_purge
    from intents.services.broadcasts import broadcast_create, broadcast_reject

    approver = member_of(tenant_a, "approver").user
    mailbox = mailbox_factory(tenant_a)

    def make(days: int, *, reject: bool = True):
        broadcast = broadcast_create(
            tenant=tenant_a,
            mailbox=mailbox,
            subject="Order {{ order }} is late",
            text="Dear {{ name }}",
            html="<p>Dear {{ name }}</p>",
            recipients=[{"address": "ana@example.com", "variables": {"name": "Ana", "order": 7}}],
        )
        if reject:
            broadcast_reject(tenant=tenant_a, broadcast_id=broadcast.pk, actor=approver, reason="x")
        Broadcast.objects.filter(pk=broadcast.pk).update(
            updated_at=timezone.now() - timedelta(days=days)
        )
        return broadcast

    old, recent, in_review = make(91), make(10), make(91, reject=False)

    assert broadcast_bodies_purge() == 1
    assert broadcast_bodies_purge() == 0

    purged = Broadcast.objects.get(pk=old.pk)
    assert (purged.text, purged.html, purged.subject) == ("", "", "Order {{ order }} is late")
    assert purged.body_purged_at is not None and purged.content_hash == old.content_hash
    assert list(
        BroadcastRecipient.objects.filter(broadcast=old).values_list("address", "variables")
    ) == [("ana@example.com", {})]
    for kept in (recent, in_review):
        assert Broadcast.objects.get(pk=kept.pk).text == "Dear {{ name }}"
        assert BroadcastRecipient.objects.get(broadcast=kept).variables == {
            "name": "Ana",
            "order": "7",
        }
    assert IntentEvent.objects.filter(broadcast=old, action="broadcast.bodies_purged").count() == 1
    page = signed_in(approver).get(f"/t/{tenant_a.slug}/broadcasts/{old.pk}/")
    assert page.status_code == 200
    assert "each recipient" in page.content.decode() and "Dear Ana" not in page.content.decode()


def _waiting_sessions() -> int:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def _finished_or_waiting(thread: threading.Thread, timeout: float = 10.0) -> None:
    """Until ``thread`` has finished or waits on a lock too (two sessions waiting)."""
    deadline = time.monotonic() + timeout
    while thread.is_alive() and _waiting_sessions() < 2 and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.mark.django_db(transaction=True)
def test_a_draft_reopened_while_the_purge_runs_keeps_its_bodies_and_notes(
    decided, tenant_a, member_of
):
    """Found by an outside probe: the purge read its rows, a person reopened one of their drafts,
    and the purge then emptied the versions and deleted the notes of a draft back in review.
    Now the purge re-checks each draft under its lock, and the reopen waits for it."""
    draft = decided(days=200, approve=True, intent_state="failed")
    reviewer = member_of(tenant_a, "approver").user
    services.draft_note_add(
        tenant=tenant_a, draft_id=draft.pk, author=reviewer, text="Resend once they confirm."
    )
    version = DraftVersion.objects.get(draft=draft)
    purging, reopening = [], []

    with transaction.atomic():
        # Holding the version's row pauses the purge between reading its rows and writing them.
        DraftVersion.objects.select_for_update().filter(pk=version.pk).get()
        purge = in_thread(draft_bodies_purge, purging)
        assert blocked_on_a_lock(), "the purge did not reach its write"
        reopen = in_thread(
            lambda: services.draft_reopen(
                tenant=tenant_a, draft_id=draft.pk, actor=reviewer, reason="They confirmed."
            ),
            reopening,
        )
        _finished_or_waiting(reopen)
    purge.join(30)
    reopen.join(30)

    assert purging == [1]
    assert [type(r) for r in reopening] == [errors.DraftError]
    assert reopening[0].code == "body_purged"
    draft.refresh_from_db()
    assert (draft.status, draft.current_version) == ("approved", 1)
    assert not DraftNote.objects.filter(draft=draft).exists()


@pytest.mark.django_db(transaction=True)
def test_two_purges_at_once_purge_a_broadcast_once_with_one_journal_row(
    tenant_a, member_of, mailbox_factory
):
    """Found by an outside probe: the broadcast purge read its rows, then updated and journaled
    every one of them without looking again. Two purges at once (the schedule on two clusters)
    both journaled `broadcast.bodies_purged` for the same broadcast, the second for an update
    that changed nothing. Each broadcast is now taken under its lock, as each draft is."""
    from intents.models import Broadcast
    from intents.retention import broadcast_bodies_purge
    from intents.services.broadcasts import broadcast_create, broadcast_reject

    approver = member_of(tenant_a, "approver").user
    broadcast = broadcast_create(
        tenant=tenant_a,
        mailbox=mailbox_factory(tenant_a),
        subject="Order {{ order }} is late",
        text="Dear {{ name }}",
        recipients=[{"address": "ana@example.com", "variables": {"name": "Ana", "order": 7}}],
    )
    broadcast_reject(tenant=tenant_a, broadcast_id=broadcast.pk, actor=approver, reason="x")
    Broadcast.objects.filter(pk=broadcast.pk).update(updated_at=timezone.now() - timedelta(days=91))
    first, second = [], []

    with transaction.atomic():
        # Holding the broadcast's row makes both purges read it before either writes it.
        Broadcast.objects.select_for_update().get(pk=broadcast.pk)
        one = in_thread(broadcast_bodies_purge, first)
        until_done_or_waiting(one, 1)
        two = in_thread(broadcast_bodies_purge, second)
        until_done_or_waiting(two, 2)
    one.join(30)
    two.join(30)
    broadcast_bodies_purge()

    assert (
        IntentEvent.objects.filter(broadcast=broadcast, action="broadcast.bodies_purged").count()
        == 1
    )
    assert Broadcast.objects.get(pk=broadcast.pk).text == ""


def test_a_purge_that_read_its_rows_before_another_purged_them_journals_nothing(decided):
    """Found by an outside probe: the schedule runs on every cluster, and a purge whose rows were
    read before another purge emptied and committed them (its draft locks taken after that commit)
    journaled ``draft.bodies_purged`` a second time for an update that changed nothing. The rows
    are now read again under the drafts' locks."""
    from intents.retention import _purge_versions

    draft = decided(days=91)
    read_by_the_second = list(
        DraftVersion.objects.filter(draft=draft).values_list("id", "tenant_id", "draft_id")
    )

    assert draft_bodies_purge() == 1
    assert _purge_versions(read_by_the_second) == 0
    assert IntentEvent.objects.filter(draft=draft, action="draft.bodies_purged").count() == 1


def test_a_draft_whose_versions_straddle_two_batches_is_purged_whole_and_journaled_once(
    decided, tenant_a, member_of
):
    """A batch is a number of versions: one that ended between two versions of a draft emptied
    the first and left the second for the next batch, journaling the draft once for each, and
    in between the draft held a body beside an emptied one."""
    draft = decided(days=91)
    Draft.objects.filter(pk=draft.pk).update(status="pending")
    services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        to=["c@example.com"],
        cc=[],
        bcc=[],
        subject="Re: order",
        text="private body, edited",
        html="",
        actor_user=member_of(tenant_a, "approver").user,
        base_version=1,
    )
    Draft.objects.filter(pk=draft.pk).update(
        status="rejected", updated_at=timezone.now() - timedelta(days=91)
    )

    assert draft_bodies_purge(batch=1) == 2

    assert list(DraftVersion.objects.filter(draft=draft).values_list("text", flat=True)) == [
        "",
        "",
    ]
    assert draft_bodies_purge(batch=1) == 0
    assert IntentEvent.objects.filter(draft=draft, action="draft.bodies_purged").count() == 1


def _failed_event_of_a_purged_draft(decided, tenant_a, admin):
    """An endpoint, and the failed delivery of the event of a draft whose bodies are purged (the
    event stayed while its delivery was being attempted)."""
    from intents.models import AgentEventEndpoint

    endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.rejected"], actor=admin
    )
    decided(days=91)
    assert draft_bodies_purge() == 1
    AgentEventDelivery.objects.update(status="failed")
    return AgentEventEndpoint.objects.get(), AgentEventDelivery.objects.get()


@pytest.mark.django_db(transaction=True)
def test_a_resend_racing_the_purge_of_its_event_is_refused_cleanly(decided, tenant_a, member_of):
    """Found by a probe: an admin resent a failed delivery while the daily purge deleted its
    event (its draft's bodies purged, no delivery being attempted). The resend had read the
    delivery before the purge committed, and inserted a delivery of an event that no longer
    existed: a foreign-key error at its commit (a 500 for the admin). It now locks the event
    and, finding it gone, answers as a resend after the purge does: no such delivery."""
    from intents.models import AgentEventEndpoint
    from intents.retention import purged_drafts_events_purge
    from intents.services.event_endpoints import delivery_resend
    from tenants.models import AuditEvent
    from tenants.services import AdminError

    admin = member_of(tenant_a, "admin").user
    endpoint, failed = _failed_event_of_a_purged_draft(decided, tenant_a, admin)
    resending, purging = [], []

    with transaction.atomic():
        # Holding the endpoint's row pauses the resend after it read the delivery.
        AgentEventEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        resend = in_thread(
            lambda: delivery_resend(tenant=tenant_a, delivery_id=failed.pk, actor=admin),
            resending,
        )
        assert blocked_on_a_lock(), "the resend did not reach the endpoint's lock"
        purge = in_thread(purged_drafts_events_purge, purging)
        purge.join(30)
    resend.join(30)

    assert purging == [2]
    assert [type(r) for r in resending] == [AdminError]
    assert resending[0].code == "not_found"
    assert not AgentEvent.objects.exists() and not AgentEventDelivery.objects.exists()
    assert not AuditEvent.objects.filter(action="agent_events.delivery_resent").exists()


@pytest.mark.django_db(transaction=True)
def test_the_purge_leaves_an_event_being_resent_for_a_later_run(decided, tenant_a, member_of):
    """The other order: the resend has made its delivery and not committed yet when the purge
    looks. The purge saw no delivery pending and deleted the event under it (the foreign-key
    error again, at the resend's commit). It now skips an event a resend holds; the next run
    takes it once that delivery ends."""
    from intents.retention import purged_drafts_events_purge
    from intents.services.event_endpoints import delivery_resend

    admin = member_of(tenant_a, "admin").user
    _endpoint, failed = _failed_event_of_a_purged_draft(decided, tenant_a, admin)
    resending, purging = [], []

    with transaction.atomic():
        # Holding the resent delivery's row pauses the resend at its commit (the new delivery's
        # foreign key to it is checked then), after it made the new delivery. (Not the tenant's
        # row: an admin's write reads it, FOR KEY SHARE, as it starts: tenants.access.)
        AgentEventDelivery.objects.select_for_update().get(pk=failed.pk)
        resend = in_thread(
            lambda: delivery_resend(tenant=tenant_a, delivery_id=failed.pk, actor=admin),
            resending,
        )
        assert blocked_on_a_lock(), "the resend did not reach its commit"
        purge = in_thread(purged_drafts_events_purge, purging)
        until_done_or_waiting(purge, 2)
    purge.join(30)
    resend.join(30)

    assert purging == [0]
    assert [type(r) for r in resending] == [AgentEventDelivery]
    assert AgentEventDelivery.objects.get(pk=resending[0].pk).status == "pending"
    assert AgentEvent.objects.filter(pk=failed.event_id).exists()
