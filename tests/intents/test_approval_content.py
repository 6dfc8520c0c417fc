"""An approval from a list reads the version's content (its looks, links, invisible characters,
look-alike domains: intents.services.approval_content) before its transaction, not under the
draft's lock: those checks take about a second per megabyte of HTML, and a list of 50 large
drafts held the draft rows, the answered messages and the tenant's send stops for tens of
seconds."""

import time

import pytest
from django.core.cache import cache
from django.db import OperationalError, connection, transaction

from intents import errors, services
from intents.models import Draft, SendIntent
from tests.intents.helpers import blocked_on_a_lock, held_open, in_thread

pytestmark = pytest.mark.django_db(transaction=True)

MISLEADING = '<p><a href="https://evil.test/pay">https://bank.example/pay</a></p>'
# About a megabyte of HTML, whose checks take about a second.
LARGE = (
    MISLEADING
    + '<td style="padding:2px"><a href="https://a.example/x">https://a.example/x</a></td>' * 12_000
)


def _session_of(pid: list, thread, idle_for: float = 0.3) -> str | None:
    """The state of the session ``pid[0]`` once it has run no query for ``idle_for`` seconds
    (its Python is at work: only the content checks take that long), or None if ``thread``
    ended first."""
    while thread.is_alive():
        if pid:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_stat_clear_snapshot()")
                cursor.execute(
                    "SELECT state FROM pg_stat_activity WHERE pid = %s "
                    "AND state LIKE 'idle%%' AND now() - state_change > %s * interval '1 second'",
                    [pid[0], idle_for],
                )
                row = cursor.fetchone()
            if row is not None:
                return row[0]
        time.sleep(0.02)
    return None


def test_a_list_approval_reads_the_content_while_nothing_is_locked(tenant_a, new_draft, approver):
    draft = new_draft(html=LARGE)
    version = draft.versions.get()
    cache.clear()  # its marks are read by this approval, not kept when the version was written
    pid: list = []
    outcome: list = []

    def approve():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid.append(cursor.fetchone()[0])
        return services.draft_approve(
            tenant=tenant_a,
            draft_id=draft.pk,
            version=version.number,
            content_hash=version.content_hash,
            actor=approver,
            unseen=True,
        )

    thread = in_thread(approve, outcome)
    state = _session_of(pid, thread)
    try:
        with transaction.atomic():
            locked = Draft.objects.select_for_update(nowait=True).get(pk=draft.pk)
    except OperationalError as error:
        locked = error
    thread.join(30)

    assert state == "idle"  # no transaction open while the checks run
    assert locked == draft
    [refusal] = outcome
    assert isinstance(refusal, errors.MisleadingLink)
    assert "https://bank.example/pay → https://evil.test/pay" in refusal.message
    assert not SendIntent.objects.filter(draft=draft).exists()


def test_a_draft_changed_between_the_content_read_and_the_lock_is_refused_as_stale(
    tenant_a, new_draft, approver
):
    """Version 1 is read and found plain; version 2, with a link that leads elsewhere, is
    written meanwhile, under the lock the approval then waits for: what was read is not what
    would be approved, and the approval is refused as stale, not given version 1's verdict."""
    draft = new_draft(html="<p>Your refund is on its way.</p>")
    first = draft.versions.get()
    outcome: list = []

    def edit():
        return services.draft_add_version(
            tenant=tenant_a,
            draft_id=draft.pk,
            to=["customer@example.com"],
            cc=[],
            bcc=[],
            subject="Your refund",
            text="We refunded your order.",
            html=MISLEADING,
            actor_user=approver,
        )

    with held_open(edit, outcome):
        approval = in_thread(
            lambda: services.draft_approve(
                tenant=tenant_a,
                draft_id=draft.pk,
                version=first.number,
                content_hash=first.content_hash,
                actor=approver,
                unseen=True,
            ),
            outcome,
        )
        assert blocked_on_a_lock()
    approval.join(30)

    [_, refusal] = outcome
    assert isinstance(refusal, errors.StaleVersion)
    assert "version 2 is current" in refusal.message
    assert not SendIntent.objects.filter(draft=draft).exists()


def test_a_kept_mark_that_says_something_still_names_it(tenant_a, new_draft, approver):
    """The marks kept when the version was written answer "nothing" without reading the body;
    one that says something has its details read, for the refusal the page's words name."""
    plain = new_draft(html="<p>Your refund is on its way.</p>")
    hidden = new_draft(text="Pay to 555\u200b0100.", html=MISLEADING)

    def approve(draft):
        version = draft.versions.get()
        return services.draft_approve(
            tenant=tenant_a,
            draft_id=draft.pk,
            version=version.number,
            content_hash=version.content_hash,
            actor=approver,
            unseen=True,
        )

    with pytest.raises(errors.MisleadingLink) as refused:
        approve(hidden)

    assert "https://bank.example/pay → https://evil.test/pay" in refused.value.message
    assert approve(plain).draft_id == plain.pk
