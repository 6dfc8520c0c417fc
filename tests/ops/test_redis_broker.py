"""Q_REDIS_URL: django-q2 on its Redis broker, end to end on a Redis of the test's own."""

import subprocess
import sys

import pytest
import redis
from django_q.models import Task

from reliability.cluster import daemons
from tests.ops.live import ROOT, manage, process_env, redis_url, wait_for

__all__ = ["redis_url"]

ENQUEUE = (
    "from django_q.tasks import async_task; from django.test import Client; "
    "print(Client(HTTP_HOST='localhost').get('/readyz').content.decode()); "
    "print(async_task('math.floor', 2.5))"
)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_q_redis_url_carries_a_task_from_the_web_to_a_cluster_through_redis(redis_url):
    env = process_env(Q_REDIS_URL=redis_url, Q_WORKERS=1)
    readyz, task_id = manage("shell", "-v", "0", "-c", ENQUEUE, env=env).splitlines()[-2:]
    queue = redis.Redis.from_url(redis_url)
    assert '"broker": "ok"' in readyz
    # The task waits in Redis (not in the ORM broker's table) until a cluster takes it.
    assert queue.llen("django_q:countersign:q") == 1
    cluster = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        done = wait_for(
            lambda: Task.objects.filter(id=task_id).first(), timeout=40, what="the task's result"
        )
    finally:
        cluster.terminate()
        cluster.wait(timeout=30)
    assert (done.success, done.result, done.func) == (True, 2, "math.floor")
    assert queue.llen("django_q:countersign:q") == 0


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_readyz_reports_the_redis_broker_down_when_nothing_answers():
    # A port just freed: nothing listens there.
    env = process_env(Q_REDIS_URL=f"redis://127.0.0.1:{daemons.free_port()}/0")
    probe = "from django.test import Client; r = Client(HTTP_HOST='localhost').get('/readyz'); print(r.status_code, r.content.decode())"
    out = manage("shell", "-v", "0", "-c", probe, env=env)
    assert out.startswith("503 ")
    assert '"broker": "error: ConnectionError"' in out


def test_q_redis_url_gets_bounded_socket_timeouts_unless_it_sets_its_own():
    show = "from django.conf import settings; print(settings.Q_CLUSTER['redis'])"
    env = process_env(Q_REDIS_URL="redis://10.0.0.1:6379/0?socket_timeout=9", Q_REDIS_TIMEOUT="0.5")
    url = manage("shell", "-v", "0", "-c", show, env=env).splitlines()[-1]
    assert url == "redis://10.0.0.1:6379/0?socket_timeout=9&socket_connect_timeout=0.5"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_sender_keeps_sending_when_the_redis_broker_is_down(
    sandbox, mailbox_factory, tenant_a, member_of
):
    from intents.models import SendIntent
    from intents.services import draft_approve, draft_create

    tenant_a.send_hold_seconds = 0
    tenant_a.save(update_fields=["send_hold_seconds"])
    approver = member_of(tenant_a, "approver").user
    draft = draft_create(
        tenant=tenant_a,
        actor_user=approver,
        mailbox=mailbox_factory(tenant_a),
        to=["customer@example.com"],
        subject="Your refund",
        text="We refunded it.",
    )
    intent = draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=draft.versions.get().content_hash,
        actor=approver,
    )
    # Nothing listens on the broker's port: the sweep's wake-ups fail; the sender must not die of
    # it but claim the due intent itself.
    env = process_env(
        Q_REDIS_URL=f"redis://127.0.0.1:{daemons.free_port()}/0",
        Q_REDIS_TIMEOUT="0.5",
        AGENTMAIL_BASE_URL=sandbox.base_url,
        AGENTMAIL_ORG_API_KEY=sandbox.org_key,
    )
    worker = ["intents_worker", "--sweep-every", "0.5", "--poll", "0.1", "--seconds", "8"]
    manage(*worker, env=env, timeout=90)
    intent.refresh_from_db()
    assert intent.state == SendIntent.State.ACCEPTED
    assert len(sandbox.ledger(idempotency_key=intent.idempotency_key)) == 1


@pytest.mark.django_db(transaction=True)
def test_the_sweep_goes_on_when_the_broker_is_down_and_agent_events_are_due(
    tenant_a, member_of, receiver, subscribe
):
    from intents.services import draft_create, draft_reject
    from tests.factories import make_local_mailbox

    subscribe(tenant_a, receiver, types=["draft.rejected"])
    approver = member_of(tenant_a, "approver").user
    draft = draft_create(
        tenant=tenant_a,
        actor_user=approver,
        mailbox=make_local_mailbox(tenant_a, username="support-sweep"),
        to=["customer@example.com"],
        subject="Your refund",
        text="We refunded it.",
    )
    draft_reject(tenant=tenant_a, draft_id=draft.pk, reason="wrong tone", actor=approver)
    env = process_env(
        Q_REDIS_URL=f"redis://127.0.0.1:{daemons.free_port()}/0", Q_REDIS_TIMEOUT="0.5"
    )
    # The agent event's wake-up fails like the intents' do; the sweep still ends with its report
    # (an unguarded wake-up raised out of it, and the sender backed off a round).
    sweep = "from intents.tasks import sweep_once; print(sweep_once()['agent_event_endpoints_due'])"
    out = manage("shell", "-v", "0", "-c", sweep, env=env, timeout=180)
    assert out.splitlines()[-1] == "1"
