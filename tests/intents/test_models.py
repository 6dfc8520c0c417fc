"""What the send tables' indexes hold. Every send rewrites its intent row twice (the lease and the
outcome) and closes its attempt row once; an update that is not HOT writes an entry into every
index whose predicate the new row meets, so an entry no query needs is paid for on each of them."""

import pytest
from django.db import connection

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
