"""The background schedules are made by migrations and only shown in the operators' admin."""

import pytest
from django.test import Client
from django_q.models import Schedule

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
