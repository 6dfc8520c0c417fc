from django.db import migrations


def create_schedule(apps, schema_editor):
    # Idempotent: re-running migrations leaves exactly one row.
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="intents-retention",
        defaults={"func": "intents.tasks.retention_purge", "schedule_type": "D", "repeats": -1},
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="intents-retention").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("intents", "0005_journal_times_from_database_clock"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
