from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Built without locking the drafts table against writes (DEPLOYMENT.md, "Upgrading").
    atomic = False

    dependencies = [
        ("intents", "0034_mailbox_attachment_storage"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="draft",
            index=models.Index(
                condition=models.Q(("status__in", ["pending", "approved"]))
                & ~models.Q(("in_reply_to", "")),
                fields=["mailbox", "in_reply_to"],
                name="draft_answering",
            ),
        ),
    ]
