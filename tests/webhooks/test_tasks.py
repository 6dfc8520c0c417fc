"""The django-q2 schedules that replay unapplied events and purge old payloads exist and run."""

from __future__ import annotations

from django_q.models import Schedule

from webhooks import tasks


def test_replay_and_purge_are_scheduled(db):
    scheduled = dict(
        Schedule.objects.filter(name__startswith="webhooks-").values_list("name", "func")
    )

    assert scheduled == {
        "webhooks-replay": "webhooks.tasks.replay_pending",
        "webhooks-purge": "webhooks.tasks.purge_payloads",
    }


def test_scheduled_tasks_run_on_an_empty_ledger(db):
    assert (tasks.replay_pending(), tasks.purge_payloads()) == (0, 0)
