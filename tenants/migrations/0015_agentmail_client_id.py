from django.db import migrations, models
from django.db.models import CharField, Value
from django.db.models.functions import Cast, Concat

import tenants.models


def keep_the_id_derived_client_id(apps, schema_editor):
    """Every existing tenant keeps the client_id its pod was (or is about to be) created with,
    "cs-tenant-<id>": a provisioning half done at the upgrade repeats with it and AgentMail
    answers with the pod already made. New tenants draw their own (new_pod_client_id)."""
    Tenant = apps.get_model("tenants", "Tenant")
    Tenant.objects.filter(agentmail_client_id__isnull=True).update(
        agentmail_client_id=Concat(Value("cs-tenant-"), Cast("id", output_field=CharField()))
    )


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0014_form_receipt"),
    ]

    operations = [
        # Null, no default, for the existing rows: a default callable given to AddField is
        # called once and its value written into every row.
        migrations.AddField(
            model_name="tenant",
            name="agentmail_client_id",
            field=models.CharField(blank=True, editable=False, max_length=100, null=True),
        ),
        migrations.RunPython(keep_the_id_derived_client_id, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="tenant",
            name="agentmail_client_id",
            field=models.CharField(
                blank=True,
                default=tenants.models.new_pod_client_id,
                editable=False,
                max_length=100,
                null=True,
            ),
        ),
        migrations.AddConstraint(
            model_name="tenant",
            constraint=models.UniqueConstraint(
                fields=("agentmail_client_id",), name="tenant_unique_agentmail_client_id"
            ),
        ),
    ]
