"""Received messages' senders are now stored with their address in the form a draft's recipients
are stored in (webhooks.normalize.sender_in_its_form: lower-cased, the domain as an A-label,
NFC), so that the customer who wrote is a participant of the reply to them. Rewrite the senders
recorded before, the same way: the address in the last angle brackets (else the whole text) when
it is a valid address; the rest, and anything that is not an address, as written."""

from django.db import migrations

BATCH = 2000
# webhooks.normalize.bounded_sender, as of this migration: an A-label is longer than the name it
# spells, and the column holds 320 characters (the address, at the end, is kept).
MAX_SENDER, SENDER_HEAD = 320, 60


def _bounded(sender: str) -> str:
    if len(sender) <= MAX_SENDER:
        return sender
    return sender[:SENDER_HEAD] + "\u2026" + sender[-(MAX_SENDER - SENDER_HEAD - 1) :]


def _in_its_form(sender: str) -> str:
    from common.addresses import normalize_address

    def address(written: str) -> str:
        try:
            return normalize_address(written)
        except ValueError:
            return ""

    if sender.endswith(">") and "<" in sender:
        head, _, written = sender[:-1].rpartition("<")
        found = address(written)
        return f"{head}<{found}>" if found else sender
    return address(sender) or sender


def rewrite(apps, schema_editor):
    InboundMessage = apps.get_model("webhooks", "InboundMessage")
    changed = []
    for row in InboundMessage.objects.only("pk", "sender").order_by("pk").iterator(BATCH):
        wanted = _bounded(_in_its_form(row.sender))
        if wanted != row.sender:
            row.sender = wanted
            changed.append(row)
        if len(changed) >= BATCH:
            InboundMessage.objects.bulk_update(changed, ["sender"])
            changed = []
    if changed:
        InboundMessage.objects.bulk_update(changed, ["sender"])


class Migration(migrations.Migration):
    dependencies = [("webhooks", "0012_inbound_backfill_turn")]

    operations = [migrations.RunPython(rewrite, migrations.RunPython.noop)]
