"""The django-q2 schedules that replay unapplied events, purge old payloads and backfill missed
webhooks exist and run, and so does the applier task the receiver wakes."""

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
        "webhooks-backfill": "webhooks.tasks.backfill",
    }


def test_scheduled_tasks_run_on_an_empty_ledger(db):
    assert (tasks.replay_pending(), tasks.purge_payloads(), tasks.apply_pending()) == (0, 0, 0)
    assert tasks.backfill() == 0
