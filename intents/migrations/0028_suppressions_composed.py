"""Addresses are now composed (NFC) again after lower-casing (common.addresses): a capital with no
composed form (J + U+030C) lower-cased to a letter that has one (U+01F0), so a suppression stored
in the first spelling missed a recipient normalised in the second. Rewrite each non-ASCII
suppression to the composed form; where it is already on the list, the stronger of the two rows
stays (the ranking of intents.services.suppressions), as 0026 did."""

import unicodedata

from django.db import migrations

RANK = {"rejected": 1, "bounced": 2, "complained": 3, "manual": 4}


def compose(apps, schema_editor):
    Suppression = apps.get_model("intents", "Suppression")
    for row in Suppression.objects.all().iterator():
        if row.address.isascii():
            continue
        wanted = unicodedata.normalize("NFC", row.address)
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
    dependencies = [("intents", "0027_draftattachment_forwarded_from_message")]

    operations = [migrations.RunPython(compose, migrations.RunPython.noop)]
