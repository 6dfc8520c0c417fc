"""DEPLOYMENT.md "Backup and restore", step 3, run as written: it moves the draft and intent id
sequences past every id the lost interval may have handed out. Written with ``max(id) + 1000000``,
it did nothing on a backup taken before the first draft or send (``max`` of no rows is NULL, and
``setval`` to NULL changes nothing), so the restored database gave the next intent id 1 again,
the id (and the send label ``cs-intent-1``) of a send the lost database may already have made.
The restore drill (reliability/restore_drill.py) always had ``COALESCE(max(id), 0)``."""

import re

import psycopg
import pytest

from tests import dbtemplate
from tests.ops.test_docs import DEPLOYMENT


def _step_three() -> str:
    restore = DEPLOYMENT.split("**Restore.**", 1)[1]
    return re.search(r"```sql\n(.*?)```", restore, re.S).group(1)


@pytest.mark.parametrize("unmigrated", ["one-migration-behind"], indirect=True)
def test_the_guides_sql_moves_the_sequences_of_tables_with_no_rows(unmigrated):
    with psycopg.connect(dbtemplate.admin_url(unmigrated), autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM intents_sendintent").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM intents_draft").fetchone() == (0,)
        conn.execute(_step_three())
        next_ids = [
            conn.execute(f"SELECT nextval(pg_get_serial_sequence('{table}', 'id'))").fetchone()[0]
            for table in ("intents_sendintent", "intents_draft")
        ]
    assert all(next_id > 1_000_000 for next_id in next_ids), next_ids


def test_step_three_moves_the_sequence_of_every_id_the_agent_api_hands_out():
    # Drafts and intents only: a broadcast made after the restore took the id of one the lost
    # interval had given an agent, whose GET and PUT .../recipients then reached the new one.
    from django.apps import apps

    from agent_api.api import api

    held = {
        part
        for path in api.get_openapi_schema()["paths"]
        for part in re.findall(r"\{(\w+)_id\}", path)
    }
    tables = {apps.get_model("intents", name)._meta.db_table for name in held}
    assert tables >= {"intents_draft", "intents_broadcast"}
    assert {table for table in tables if f"'{table}'" not in _step_three()} == set()
