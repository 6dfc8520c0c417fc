from django.db import migrations


class Migration(migrations.Migration):
    """The database default of ``reply_to`` for a database that applied 0015 as it was first
    written (a Python default only, so the column was NOT NULL with none): every inbound message
    a process of the release before recorded, which names no ``reply_to``, was refused there.
    0015 now adds the column with its default; this sets it where 0015 ran before, and changes
    nothing where it is already set."""

    dependencies = [
        ("webhooks", "0015_inbound_reply_to"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE webhooks_inboundmessage ALTER COLUMN reply_to SET DEFAULT '[]'::jsonb",
            migrations.RunSQL.noop,
        ),
    ]
