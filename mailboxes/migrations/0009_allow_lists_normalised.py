"""A mailbox's allow-lists are now kept in the form recipients are compared in
(common.addresses: lower-cased, the domain in ASCII). Addresses were stored lower-cased as
typed, so one with an IDN domain (``ana@bücher.de``) no longer matched the recipient
``ana@xn--bcher-kva.de``. Rewrite each entry that has a normal form; keep any other as it is."""

from django.db import migrations


def _normal(address):
    from email_validator import EmailNotValidError, validate_email

    try:
        result = validate_email(address, check_deliverability=False, test_environment=True)
    except EmailNotValidError:
        return address
    return f"{result.local_part}@{result.ascii_domain}".lower()


def normalise(apps, schema_editor):
    Mailbox = apps.get_model("mailboxes", "Mailbox")
    for mailbox in Mailbox.objects.exclude(allowed_addresses=[]).iterator():
        wanted = list(dict.fromkeys(_normal(a) for a in mailbox.allowed_addresses))
        if wanted != list(mailbox.allowed_addresses):
            Mailbox.objects.filter(pk=mailbox.pk).update(allowed_addresses=wanted)


class Migration(migrations.Migration):
    dependencies = [("mailboxes", "0008_mailbox_key_refused")]

    operations = [migrations.RunPython(normalise, migrations.RunPython.noop)]
