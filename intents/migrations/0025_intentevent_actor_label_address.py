"""A person's journal row keeps their address as it was when they acted, in ``actor_label``
(until now only non-person actors' labels, at most 100 characters): widened to an address's 254.

Widening a varchar is a catalogue change in PostgreSQL: no table rewrite, no index rebuild, and
no row is touched, so the append-only trigger (0003) does not fire. Earlier rows are not
back-filled: the journal is append-only, and the pages fall back to the person's address today
for a row without one, as they did until now."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("intents", "0024_agent_events_reopened_cancelled_expired"),
    ]

    operations = [
        migrations.AlterField(
            model_name="intentevent",
            name="actor_label",
            field=models.CharField(blank=True, max_length=254),
        ),
    ]
