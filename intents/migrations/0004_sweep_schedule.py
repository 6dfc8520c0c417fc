import math

from django.conf import settings
from django.db import migrations

SCHEDULE_NAME = "intents-sweep"


def create_schedule(apps, schema_editor):
    # Idempotent: re-running migrations (or several deploys racing) leaves exactly one row.
    Schedule = apps.get_model("django_q", "Schedule")
    minutes = max(1, math.ceil(settings.SWEEP_INTERVAL_SECONDS / 60))
    Schedule.objects.update_or_create(
        name=SCHEDULE_NAME,
        defaults={
            "func": "intents.tasks.sweep",
            "schedule_type": "I",
            "minutes": minutes,
            "repeats": -1,
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SCHEDULE_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("intents", "0003_journal_append_only"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
