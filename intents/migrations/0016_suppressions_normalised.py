"""Manual suppressions were stored lower-cased as typed, sends compare the normalised address
(intents.policy.normalize_address: an IDN domain in Unicode, NFC): a row typed in punycode never
matched. Rewrite each row that differs to the normalised form; where that form is already on
the list, the stronger of the two rows stays (the ranking of intents.services.suppressions)."""

from django.db import migrations

RANK = {"rejected": 1, "bounced": 2, "complained": 3, "manual": 4}


def normalise(apps, schema_editor):
    from email_validator import EmailNotValidError, validate_email

    Suppression = apps.get_model("intents", "Suppression")
    for row in Suppression.objects.all().iterator():
        try:
            wanted = validate_email(
                row.address, check_deliverability=False, test_environment=True
            ).normalized.lower()
        except EmailNotValidError:
            continue
        if wanted == row.address:
            continue
        twin = Suppression.objects.filter(tenant_id=row.tenant_id, address=wanted).first()
        if twin is None:
            Suppression.objects.filter(pk=row.pk).update(address=wanted)
        elif RANK.get(row.reason, 0) > RANK.get(twin.reason, 0):
            twin.delete()
            Suppression.objects.filter(pk=row.pk).update(address=wanted)
        else:
            row.delete()


class Migration(migrations.Migration):
    dependencies = [("intents", "0015_fewer_index_entries")]

    operations = [migrations.RunPython(normalise, migrations.RunPython.noop)]
