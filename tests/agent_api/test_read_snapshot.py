"""GET /drafts/{id} answers from one snapshot: the draft, its version and its send as they were
at one moment, even while a person approves the draft between the reads."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from intents import services
from intents.models import DraftVersion, SendIntent
from tests.agent_api.conftest import draft_body
from tests.intents.helpers import blocked_on_a_lock, in_thread

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_read_racing_an_approval_sees_the_draft_and_its_send_at_one_moment(
    api, make_token, tenant_a, mailbox_a, member_of
):
    """The read takes the draft and its version, then the send table, which another session
    holds (ACCESS EXCLUSIVE, the test's way to stop the read between its statements) while it
    approves the draft and commits. Each statement read its own snapshot: the answer said
    ``pending`` with a queued send, a state no moment of the database ever had."""
    token = make_token(tenant_a)
    reviewer = member_of(tenant_a, "approver").user
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=token, key="s-1").json()["id"]
    first = DraftVersion.objects.get(draft_id=draft_id, number=1)
    outcome: list = []

    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {SendIntent._meta.db_table} IN ACCESS EXCLUSIVE MODE")
        reader = in_thread(lambda: api.get(f"/drafts/{draft_id}", token=token), outcome)
        assert blocked_on_a_lock(), "the read never reached the send table"
        services.draft_approve(
            tenant=tenant_a,
            draft_id=draft_id,
            version=1,
            content_hash=first.content_hash,
            actor=reviewer,
        )
    reader.join(30)

    [read] = outcome
    assert read.status_code == 200, read.content
    document = read.json()
    assert (document["status"], document["intent"]) == ("pending", None)


def test_a_read_takes_no_more_statements_than_before(
    api, make_token, tenant_a, mailbox_a, member_of
):
    """The snapshot's level rides on the transaction's BEGIN: no SET TRANSACTION statement."""
    token = make_token(tenant_a)
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=token, key="s-2").json()["id"]
    first = DraftVersion.objects.get(draft_id=draft_id, number=1)
    services.draft_approve(
        tenant=tenant_a,
        draft_id=draft_id,
        version=1,
        content_hash=first.content_hash,
        actor=member_of(tenant_a, "approver").user,
    )
    api.get(f"/drafts/{draft_id}", token=token)

    with CaptureQueriesContext(connection) as queries:
        read = api.get(f"/drafts/{draft_id}", token=token)

    assert (read.status_code, read.json()["intent"]["state"]) == (200, "queued")
    # Before: token, rate window, the token's deferred scope, draft, version, send,
    # attachments, deliveries. Now the scope comes with the token and the version with the
    # draft, and the snapshot's BEGIN and COMMIT take their places.
    assert len(queries.captured_queries) == 8
