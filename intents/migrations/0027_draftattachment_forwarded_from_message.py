"""A forwarded file names the customer's message it came from: its provider message id and its
sender as recorded, so the draft page can say whose file a reply carries and an approval from a
list can leave out a reply that sends it to someone else.

Both columns are added with a constant default, which PostgreSQL stores in the catalogue: no
table rewrite. Rows written before are left empty (their source was not recorded): the page
shows no source for them and no rule flags them."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("intents", "0026_suppressions_ascii_domains"),
    ]

    operations = [
        migrations.AddField(
            model_name="draftattachment",
            name="source_message_id",
            field=models.CharField(blank=True, default="", max_length=998),
        ),
        migrations.AddField(
            model_name="draftattachment",
            name="source_sender",
            field=models.CharField(blank=True, default="", max_length=320),
        ),
    ]
