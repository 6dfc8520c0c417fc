from django.db import migrations

SCHEDULES = {
    # Asks AgentMail for deliveries and inbound mail whose webhooks never arrived.
    "webhooks-backfill": {
        "func": "webhooks.tasks.backfill",
        "schedule_type": "I",
        "minutes": 10,
    },
}


def create_schedules(apps, schema_editor):
    # Idempotent: re-running migrations (or several deploys racing) leaves exactly one row each.
    Schedule = apps.get_model("django_q", "Schedule")
    for name, fields in SCHEDULES.items():
        Schedule.objects.update_or_create(name=name, defaults={**fields, "repeats": -1})


def remove_schedules(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name__in=list(SCHEDULES)).delete()


class Migration(migrations.Migration):
    dependencies = [("webhooks", "0003_journal_times_from_database_clock")]

    operations = [migrations.RunPython(create_schedules, remove_schedules)]
