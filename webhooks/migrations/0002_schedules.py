from django.db import migrations

SCHEDULES = {
    # Applies events stored but not applied (a crash between store and apply, or a deferred
    # event whose on-commit hand-over from the worker was lost).
    "webhooks-replay": {
        "func": "webhooks.tasks.replay_pending",
        "schedule_type": "I",
        "minutes": 1,
    },
    # Retention: drops webhook payloads older than each tenant's retention_days.
    "webhooks-purge": {"func": "webhooks.tasks.purge_payloads", "schedule_type": "D"},
}


def create_schedules(apps, schema_editor):
    # Idempotent: re-running migrations (or several deploys racing) leaves exactly one row each.
    Schedule = apps.get_model("django_q", "Schedule")
    for name, fields in SCHEDULES.items():
        Schedule.objects.update_or_create(name=name, defaults={**fields, "repeats": -1})


def remove_schedules(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name__in=list(SCHEDULES)).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0001_initial"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(create_schedules, remove_schedules)]
