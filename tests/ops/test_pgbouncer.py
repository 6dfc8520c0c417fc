"""DB_PGBOUNCER: the send path (provision, approve, worker, sandbox) through a PgBouncer in
transaction mode started by the test, where consecutive transactions of one client land on
whichever server session is free."""

import subprocess
import sys

import pytest

from intents.models import SendIntent
from tests.ops.live import ROOT, manage, pgbouncer_url, process_env, wait_for

__all__ = ["pgbouncer_url"]

APPROVE = """
import os
from django.conf import settings
from django.db import connection
from intents.models import DraftVersion
from intents.services import draft_approve, draft_create
from mailboxes.provisioning import mailbox_create
from tenants.models import Tenant, User
connection.ensure_connection()
print(connection.connection.prepare_threshold, settings.DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"])
tenant = Tenant.objects.get(pk=int(os.environ["TENANT_ID"]))
approver = User.objects.get(pk=int(os.environ["APPROVER_ID"]))
mailbox = mailbox_create(tenant=tenant, username="bouncer")
for i in range(12):
    draft = draft_create(tenant=tenant, actor_user=approver, mailbox=mailbox,
                         to=[f"c{i}@example.com"], subject=f"Re: {i}", text=f"Answer {i}")
    version = DraftVersion.objects.get(draft=draft, number=1)
    draft_approve(tenant=tenant, draft_id=draft.pk, version=1,
                  content_hash=version.content_hash, actor=approver)
"""


WORKER = [
    "--threads",
    "2",
    "--batch",
    "3",
    "--poll",
    "0.05",
    "--sweep-every",
    "1",
    "--seconds",
    "60",
]


@pytest.mark.slow
def test_the_send_path_through_pgbouncer_in_transaction_mode(
    pgbouncer_url, sandbox, tenant_a, member_of, tmp_path
):
    approver = member_of(tenant_a, "approver").user
    tenant_a.send_hold_seconds = 0
    tenant_a.save(update_fields=["send_hold_seconds"])
    env = process_env(
        DATABASE_URL=pgbouncer_url,
        DB_PGBOUNCER="true",
        AGENTMAIL_BASE_URL=sandbox.base_url,
        AGENTMAIL_ORG_API_KEY=sandbox.org_key,
        PUBLIC_BASE_URL="http://127.0.0.1:9",
        TENANT_ID=tenant_a.pk,
        APPROVER_ID=approver.pk,
    )
    options = manage("shell", "-v", "0", "-c", APPROVE, env=env).splitlines()[-1]
    # No named prepared statements, no server-side cursors: nothing outlives a transaction.
    assert options == "None True"
    logs = [tmp_path / f"worker{i}.log" for i in range(2)]
    workers = [
        subprocess.Popen(
            [sys.executable, "manage.py", "intents_worker", *WORKER],
            cwd=ROOT,
            env={**env, "LOG_LEVEL": "INFO"},
            stdout=subprocess.DEVNULL,
            stderr=log.open("w"),
        )
        for log in logs
    ]
    try:
        wait_for(
            lambda: SendIntent.objects.filter(tenant=tenant_a, state="accepted").count() == 12,
            timeout=60,
            what="12 sends accepted",
        )
        # One worker may send all twelve while the other is still importing Django; a SIGTERM
        # then would end it before its handler exists (exit -15), which is not what this checks.
        wait_for(
            lambda: all("intents.worker.started" in log.read_text() for log in logs),
            timeout=60,
            what="both workers started",
        )
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=30)
    keys = list(
        SendIntent.objects.filter(tenant=tenant_a).values_list("idempotency_key", flat=True)
    )
    ledger = [sandbox.ledger(idempotency_key=key) for key in keys]
    assert [len(sends) for sends in ledger] == [1] * 12
    assert [w.returncode for w in workers] == [0, 0], [log.read_text()[-2000:] for log in logs]
