"""Three agent events: draft.reopened, send.cancelled, send.expired. An endpoint subscribed to
every event before them gets them too (the console offered "all" as the default); one that
chose some keeps its choice."""

import django.contrib.postgres.fields
from django.db import migrations, models

EARLIER = [
    "draft.approved",
    "draft.edited",
    "draft.rejected",
    "draft.expired",
    "draft.withdrawn",
    "send.accepted",
    "send.delivered",
    "send.bounced",
    "send.complained",
    "send.needs_attention",
    "send.failed",
    "send.blocked",
]
ADDED = ["draft.reopened", "send.cancelled", "send.expired"]


def subscribe_all_to_the_new_events(apps, schema_editor):
    Endpoint = apps.get_model("intents", "AgentEventEndpoint")
    for endpoint in Endpoint.objects.filter(event_types__contains=EARLIER):
        endpoint.event_types = sorted(set(endpoint.event_types) | set(ADDED))
        endpoint.save(update_fields=["event_types"])


class Migration(migrations.Migration):
    dependencies = [
        ("intents", "0023_attachment_storage"),
    ]

    operations = [
        migrations.AlterField(
            model_name="agentevent",
            name="type",
            field=models.CharField(
                choices=[
                    ("draft.approved", "A draft was approved"),
                    ("draft.edited", "A person saved a new version of a draft"),
                    ("draft.rejected", "A draft was rejected"),
                    ("draft.expired", "A draft expired without a decision"),
                    ("draft.withdrawn", "The agent withdrew a draft"),
                    ("send.accepted", "AgentMail accepted a send"),
                    ("send.delivered", "A send was delivered"),
                    ("send.bounced", "A send bounced"),
                    ("send.complained", "A recipient complained"),
                    ("send.needs_attention", "A send needs a person"),
                    ("send.failed", "A send failed"),
                    ("send.blocked", "A send was blocked before the call"),
                    ("draft.reopened", "An approved draft went back into review"),
                    ("send.cancelled", "A person cancelled a send"),
                    ("send.expired", "A send passed its send-by time unsent"),
                ],
                max_length=32,
            ),
        ),
        migrations.AlterField(
            model_name="agenteventendpoint",
            name="event_types",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(
                    choices=[
                        ("draft.approved", "A draft was approved"),
                        ("draft.edited", "A person saved a new version of a draft"),
                        ("draft.rejected", "A draft was rejected"),
                        ("draft.expired", "A draft expired without a decision"),
                        ("draft.withdrawn", "The agent withdrew a draft"),
                        ("send.accepted", "AgentMail accepted a send"),
                        ("send.delivered", "A send was delivered"),
                        ("send.bounced", "A send bounced"),
                        ("send.complained", "A recipient complained"),
                        ("send.needs_attention", "A send needs a person"),
                        ("send.failed", "A send failed"),
                        ("send.blocked", "A send was blocked before the call"),
                        ("draft.reopened", "An approved draft went back into review"),
                        ("send.cancelled", "A person cancelled a send"),
                        ("send.expired", "A send passed its send-by time unsent"),
                    ],
                    max_length=32,
                )
            ),
        ),
        migrations.RunPython(subscribe_all_to_the_new_events, migrations.RunPython.noop),
    ]
