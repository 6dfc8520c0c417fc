"""The background schedules are made by migrations and only shown in the operators' admin."""

import uuid

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.test import Client
from django.utils import timezone
from django_q.models import OrmQ, Schedule, Task
from django_q.signing import SignedPackage

from tenants.models import User

pytestmark = pytest.mark.django_db

SCHEDULES = "/ops/admin/django_q/schedule/"


def test_the_sweep_cannot_be_deleted_changed_or_joined_by_another_schedule_here():
    """A deleted sweep never came back (migrations made it), and a schedule added here ran any
    importable function in the workers."""
    before = list(Schedule.objects.order_by("pk").values_list("name", "func"))
    sweep = Schedule.objects.get(func="intents.tasks.sweep")
    operator = Client()
    operator.force_login(User.objects.create_superuser("ops@countersign.test", "operator-pass-1"))

    answers = [
        operator.get(SCHEDULES).status_code,
        operator.post(f"{SCHEDULES}{sweep.pk}/delete/", {"post": "yes"}).status_code,
        operator.post(
            f"{SCHEDULES}{sweep.pk}/change/",
            {"name": "intents-sweep", "func": "os.system", "schedule_type": "O"},
        ).status_code,
        operator.post(
            f"{SCHEDULES}add/", {"name": "x", "func": "os.system", "schedule_type": "O"}
        ).status_code,
    ]

    assert answers == [200, 403, 403, 403]
    assert list(Schedule.objects.order_by("pk").values_list("name", "func")) == before


def _operator() -> Client:
    operator = Client()
    operator.force_login(User.objects.create_superuser("ops@countersign.test", "operator-pass-1"))
    return operator


def _task(*, success: bool) -> Task:
    now = timezone.now()
    return Task.objects.create(
        id=uuid.uuid4().hex,
        name=f"intent-{uuid.uuid4().hex[:6]}",
        func="intents.tasks.execute_intent",
        args=(1,),
        started=now,
        stopped=now,
        success=success,
    )


def _rows() -> dict[str, list]:
    return {
        "tasks": list(Task.objects.order_by("id").values_list("id", "success")),
        "queue": list(OrmQ.objects.order_by("pk").values_list("pk", "key", "lock")),
        "attempts": list(
            AccessAttempt.objects.order_by("pk").values_list("pk", "failures_since_start")
        ),
        "logs": list(AccessLog.objects.order_by("pk").values_list("pk", "username")),
        "failures": list(AccessFailureLog.objects.order_by("pk").values_list("pk", "username")),
    }


def test_task_results_the_queue_and_the_sign_in_throttle_are_read_only_here():
    """Found by an outside probe: django-q2's task results, its ORM queue and django-axes' rows
    could be edited, deleted (one by one or "Delete selected") and resubmitted here. Resubmitting
    ran a worker task past the services' callers (and deleted its failure row), deleting a lock-out
    let a password guesser go on at once and erased the trace of it, all with no audit row; none of
    it is an operator action the deployment guide names."""
    failure, success = _task(success=False), _task(success=True)
    queued = OrmQ.objects.create(
        key="countersign",
        payload=SignedPackage.dumps({"id": "q1", "name": "q1", "func": "intents.tasks.drain"}),
    )
    attempt = AccessAttempt.objects.create(
        username="bob@acme.test", ip_address="203.0.113.9", user_agent="x", failures_since_start=9
    )
    log = AccessLog.objects.create(username="bob@acme.test", ip_address="203.0.113.9")
    failed_log = AccessFailureLog.objects.create(username="bob@acme.test", ip_address="203.0.113.9")
    rows = {
        "django_q/failure": failure.pk,
        "django_q/success": success.pk,
        "django_q/ormq": queued.pk,
        "axes/accessattempt": attempt.pk,
        "axes/accesslog": log.pk,
        "axes/accessfailurelog": failed_log.pk,
    }
    operator = _operator()  # its sign-in is an AccessLog row too
    before = _rows()

    answers = {}
    for path, pk in rows.items():
        url = f"/ops/admin/{path}/"
        answers[path] = [
            operator.get(url).status_code,
            operator.get(f"{url}{pk}/change/").status_code,
            operator.post(f"{url}{pk}/change/", {"key": "elsewhere", "lock": ""}).status_code,
            operator.post(f"{url}{pk}/delete/", {"post": "yes"}).status_code,
        ]
        for action in ("delete_selected", "resubmit_task", "cleanup_expired_attempts"):
            operator.post(url, {"action": action, "_selected_action": [pk], "post": "yes"})

    assert answers == {path: [200, 200, 403, 403] for path in rows}
    assert _rows() == before
    assert OrmQ.objects.count() == 1
