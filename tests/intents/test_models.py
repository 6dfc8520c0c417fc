"""What the send tables' indexes hold. Every send rewrites its intent row twice (the lease and the
outcome) and closes its attempt row once; an update that is not HOT writes an entry into every
index whose predicate the new row meets, so an entry no query needs is paid for on each of them."""

import pytest
from django.db import connection

from intents import sending
from intents.models import SendAttempt

pytestmark = pytest.mark.django_db


def index_definitions(table: str, column: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_indexdef(x.indexrelid) FROM pg_index AS x JOIN pg_attribute AS a "
            "ON a.attrelid = x.indrelid AND a.attnum = ANY(x.indkey) "
            "WHERE x.indrelid = %s::regclass AND a.attname = %s ORDER BY 1",
            [table, column],
        )
        return [row[0] for row in cursor.fetchall()]


def test_a_reply_has_no_entry_in_the_one_send_per_broadcast_recipient_index():
    assert index_definitions("intents_sendintent", "broadcast_recipient_id") == [
        "CREATE UNIQUE INDEX intent_unique_broadcast_recipient ON public.intents_sendintent "
        "USING btree (broadcast_recipient_id) WHERE (broadcast_recipient_id IS NOT NULL)"
    ]


def updates_of(table: str) -> tuple[int, int]:
    """(rows updated, of which HOT) in ``table`` so far, this connection's counts flushed first."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = %s::regclass",
            [table],
        )
        return cursor.fetchone()


@pytest.mark.django_db(transaction=True)
def test_a_batch_of_accepted_sends_closes_its_attempt_rows_in_place(live, settings):
    # No column the close writes is indexed, so with room on the row's page the close is HOT:
    # no new entry in any of the table's three indexes.
    settings.SEND_RATE_PER_KEY = settings.SEND_BURST_PER_KEY = 1000
    for i in range(48):
        live.approved(subject=f"Order {i}")
    updated, hot = updates_of("intents_sendattempt")
    assert sending.run_once(worker="w", limit=48) == 48
    assert SendAttempt.objects.filter(outcome="accepted").count() == 48
    after = updates_of("intents_sendattempt")
    assert (after[0] - updated, after[1] - hot) == (48, 48)
