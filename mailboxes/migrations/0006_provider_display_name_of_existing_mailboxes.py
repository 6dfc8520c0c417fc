from django.db import migrations


def record_provider_display_names(apps, schema_editor):
    """What AgentMail holds for each existing inbox: the name it was created with. Until now a
    rename never reached AgentMail, so a mailbox renamed since (its first ``policy_changed``
    audit row that changed the name says from what) is still sent under that first name, and
    the sync sweep brings it to the current one; any other mailbox holds its current name."""
    Mailbox = apps.get_model("mailboxes", "Mailbox")
    AuditEvent = apps.get_model("tenants", "AuditEvent")
    created_as: dict[str, str] = {}
    renames = AuditEvent.objects.filter(
        action="mailbox.policy_changed", object_type="mailbox"
    ).order_by("created_at", "pk")
    for object_id, data in renames.values_list("object_id", "data").iterator():
        before, after = (data or {}).get("before") or {}, (data or {}).get("after") or {}
        if object_id in created_as or "display_name" not in before:
            continue
        if before["display_name"] != after.get("display_name", before["display_name"]):
            created_as[object_id] = before["display_name"]
    for mailbox in Mailbox.objects.only("pk", "display_name").iterator():
        name = created_as.get(str(mailbox.pk), mailbox.display_name)
        Mailbox.objects.filter(pk=mailbox.pk).update(provider_display_name=name)


class Migration(migrations.Migration):
    dependencies = [
        ("mailboxes", "0005_mailbox_provider_display_name_and_sync"),
        ("tenants", "0002_journal_times_from_database_clock"),
    ]

    operations = [
        migrations.RunPython(record_provider_display_names, migrations.RunPython.noop),
    ]
