from django.db import migrations, models
from django.db.models import CharField, Value
from django.db.models.functions import Cast, Concat

import mailboxes.models


def keep_the_id_derived_client_id(apps, schema_editor):
    """Every existing mailbox keeps the client_id its inbox was (or is about to be) created
    with, "cs-mailbox-<id>": a provisioning half done at the upgrade repeats with it and
    AgentMail answers with the inbox already made. New mailboxes draw their own."""
    Mailbox = apps.get_model("mailboxes", "Mailbox")
    Mailbox.objects.filter(agentmail_client_id__isnull=True).update(
        agentmail_client_id=Concat(Value("cs-mailbox-"), Cast("id", output_field=CharField()))
    )


class Migration(migrations.Migration):
    dependencies = [
        ("mailboxes", "0010_allow_lists_composed"),
    ]

    operations = [
        # Null, no default, for the existing rows: a default callable given to AddField is
        # called once and its value written into every row.
        migrations.AddField(
            model_name="mailbox",
            name="agentmail_client_id",
            field=models.CharField(blank=True, editable=False, max_length=100, null=True),
        ),
        migrations.RunPython(keep_the_id_derived_client_id, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="mailbox",
            name="agentmail_client_id",
            field=models.CharField(
                blank=True,
                default=mailboxes.models.new_inbox_client_id,
                editable=False,
                max_length=100,
                null=True,
            ),
        ),
        migrations.AddConstraint(
            model_name="mailbox",
            constraint=models.UniqueConstraint(
                fields=("agentmail_client_id",), name="mailbox_unique_agentmail_client_id"
            ),
        ),
    ]
