"""Addresses are now composed (NFC) again after lower-casing (common.addresses), so an allowed
address stored decomposed (J + U+030C) no longer matched its recipient (U+01F0). Rewrite each
allow-list entry to the composed form, dropping entries that become the same."""

import unicodedata

from django.db import migrations


def compose(apps, schema_editor):
    Mailbox = apps.get_model("mailboxes", "Mailbox")
    for mailbox in Mailbox.objects.exclude(allowed_addresses=[]).iterator():
        wanted = list(
            dict.fromkeys(unicodedata.normalize("NFC", a) for a in mailbox.allowed_addresses)
        )
        if wanted != list(mailbox.allowed_addresses):
            Mailbox.objects.filter(pk=mailbox.pk).update(allowed_addresses=wanted)


class Migration(migrations.Migration):
    dependencies = [("mailboxes", "0009_allow_lists_normalised")]

    operations = [migrations.RunPython(compose, migrations.RunPython.noop)]
