from django.db import migrations, models
from django.db.models import CharField, Value
from django.db.models.functions import Cast, Concat

import webhooks.models


def keep_the_tenant_derived_client_id(apps, schema_editor):
    """Every existing endpoint keeps the client_id its webhook was (or is about to be) created
    with, "cs-webhook-<tenant id>": a registration half done at the upgrade repeats with it and
    AgentMail answers with the webhook already made. New endpoints draw their own."""
    WebhookEndpoint = apps.get_model("webhooks", "WebhookEndpoint")
    WebhookEndpoint.objects.filter(agentmail_client_id__isnull=True).update(
        agentmail_client_id=Concat(
            Value("cs-webhook-"), Cast("tenant_id", output_field=CharField())
        )
    )


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0013_inbound_senders_in_recipients_form"),
    ]

    operations = [
        # Null, no default, for the existing rows: a default callable given to AddField is
        # called once and its value written into every row.
        migrations.AddField(
            model_name="webhookendpoint",
            name="agentmail_client_id",
            field=models.CharField(blank=True, editable=False, max_length=100, null=True),
        ),
        migrations.RunPython(keep_the_tenant_derived_client_id, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="webhookendpoint",
            name="agentmail_client_id",
            field=models.CharField(
                blank=True,
                default=webhooks.models.new_webhook_client_id,
                editable=False,
                max_length=100,
                null=True,
            ),
        ),
    ]
