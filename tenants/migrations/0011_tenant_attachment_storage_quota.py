"""A tenant's own attachment storage quota, set by an operator (``manage.py
tenant_storage_quota``). Expand only: a nullable column (null: the deployment's
``TENANT_ATTACHMENT_STORAGE_BYTES``, what every tenant had) and a constraint every existing row
meets."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0010_invitation_by_operator"),
    ]

    operations = [
        migrations.AddField(
            model_name="tenant",
            name="attachment_storage_quota_bytes",
            field=models.BigIntegerField(
                blank=True,
                help_text="Attachment bytes this tenant may hold; blank: the deployment's quota.",
                null=True,
            ),
        ),
        migrations.AddConstraint(
            model_name="tenant",
            constraint=models.CheckConstraint(
                condition=models.Q(attachment_storage_quota_bytes__isnull=True)
                | models.Q(attachment_storage_quota_bytes__range=(1, 1125899906842624)),
                name="tenant_storage_quota_in_range",
            ),
        ),
    ]
