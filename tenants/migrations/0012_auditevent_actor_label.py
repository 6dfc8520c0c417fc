"""An audit row keeps its actor's address as it was when they acted (``actor_label``), so the log
still names them after they change it. Expand only: a column with a database default, no table
rewrite; rows that processes of the release before write meanwhile get "".

The rows written before it keep "": they never recorded an address, and the log shows them with
their actor's current one, as it did until now. They are not back-filled: the table is
append-only by trigger (intents 0003), and filling them would mean turning that guard off for
a guess that the page already makes."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0011_tenant_attachment_storage_quota"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="actor_label",
            field=models.CharField(blank=True, db_default="", default="", max_length=254),
        ),
    ]
