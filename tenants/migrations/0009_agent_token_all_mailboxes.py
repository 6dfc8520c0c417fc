"""Agent tokens say "every mailbox" with a flag instead of an empty mailbox set.

Every token that has no mailbox today was created to reach all of them, so it gets the flag; from
now on an empty set with the flag off reaches nothing.
"""

from django.db import migrations, models


def flag_unrestricted_tokens(apps, schema_editor):
    AgentToken = apps.get_model("tenants", "AgentToken")
    AgentToken.objects.filter(mailboxes__isnull=True).update(all_mailboxes=True)


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0008_sign_in_factors_passkeys_sso_sessions"),
    ]

    operations = [
        migrations.AddField(
            model_name="agenttoken",
            name="all_mailboxes",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(flag_unrestricted_tokens, migrations.RunPython.noop),
    ]
