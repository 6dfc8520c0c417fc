from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # The indexes are built and dropped without locking the webhook ledger against the
    # receiver's writes (DEPLOYMENT.md, "Upgrading"); the new one before the old one goes, so
    # the applier's take always has one.
    atomic = False

    dependencies = [
        ("tenants", "0016_account_addresses_as_a_labels"),
        ("webhooks", "0018_backfill_lease"),
    ]

    operations = [
        migrations.AddField(
            model_name="webhookevent",
            name="apply_failures",
            field=models.PositiveSmallIntegerField(db_default=0, default=0),
        ),
        migrations.AlterField(
            model_name="webhookevent",
            name="state",
            field=models.CharField(
                choices=[
                    ("pending", "Stored, not applied yet"),
                    ("deferred", "Waiting for its message id to be recorded"),
                    ("applied", "Applied"),
                    ("ignored", "Ignored (unknown type or no effect)"),
                    ("rejected", "Rejected (not this tenant's inbox)"),
                    ("failed", "Could not be applied: an operator retries it"),
                ],
                default="pending",
                max_length=10,
            ),
        ),
        AddIndexConcurrently(
            model_name="webhookevent",
            index=models.Index(
                condition=models.Q(("state__in", ["pending", "deferred"])),
                fields=["state", "apply_failures", "received_at"],
                name="webhookevent_take",
            ),
        ),
        RemoveIndexConcurrently(
            model_name="webhookevent",
            name="webhookevent_unapplied",
        ),
        AddIndexConcurrently(
            model_name="webhookevent",
            index=models.Index(
                condition=models.Q(("state", "failed")),
                fields=["tenant"],
                name="webhookevent_failed",
            ),
        ),
    ]
