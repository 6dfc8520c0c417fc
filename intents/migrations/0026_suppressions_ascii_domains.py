"""Addresses are now normalised with the domain in ASCII (common.addresses.normalize_address:
``ana@xn--bcher-kva.de``, no longer ``ana@bücher.de``), so that a look-alike domain shows as what
it is and an IDN domain written in an allow-list matches. Rewrite each suppression to that form;
where it is already on the list, the stronger of the two rows stays (the ranking of
intents.services.suppressions), as 0016 did for the previous form."""

from django.db import migrations

RANK = {"rejected": 1, "bounced": 2, "complained": 3, "manual": 4}


def normalise(apps, schema_editor):
    from email_validator import EmailNotValidError, validate_email

    Suppression = apps.get_model("intents", "Suppression")
    for row in Suppression.objects.all().iterator():
        if row.address.isascii():
            continue  # already in that form: 0016 normalised every row, punycode is ASCII
        try:
            result = validate_email(row.address, check_deliverability=False, test_environment=True)
        except EmailNotValidError:
            continue
        wanted = f"{result.local_part}@{result.ascii_domain}".lower()
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
    dependencies = [("intents", "0025_intentevent_actor_label_address")]

    operations = [migrations.RunPython(normalise, migrations.RunPython.noop)]
