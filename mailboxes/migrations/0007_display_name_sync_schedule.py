from django.db import migrations

SCHEDULES = {
    # Brings renamed mailboxes' display names to AgentMail when the wake-up on commit was lost
    # or the call failed (mailboxes.display_names), with backoff.
    "mailboxes-sync-names": {
        "func": "mailboxes.tasks.sync_display_names",
        "schedule_type": "I",
        "minutes": 1,
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
    dependencies = [
        ("mailboxes", "0006_provider_display_name_of_existing_mailboxes"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(create_schedules, remove_schedules)]
