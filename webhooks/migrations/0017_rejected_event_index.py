from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Built without locking the webhook ledger against the receiver's writes (DEPLOYMENT.md,
    # "Upgrading").
    atomic = False

    dependencies = [
        ("webhooks", "0016_inbound_reply_to_db_default"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="webhookevent",
            index=models.Index(
                condition=models.Q(("state", "rejected")),
                fields=["received_at"],
                name="webhookevent_rejected",
            ),
        ),
    ]
