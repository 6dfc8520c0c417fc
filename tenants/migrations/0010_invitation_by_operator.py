"""An invitation made by an operator (tenants.onboarding) says so with a flag: the first admin of
a new tenant is invited by nobody in it. Expand only: a column with a database default, and a
constraint every existing row meets (none has the flag)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("mailboxes", "0004_mailbox_provisioning_lease"),
        ("tenants", "0009_agent_token_all_mailboxes"),
    ]

    operations = [
        migrations.AddField(
            model_name="invitation",
            name="by_operator",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddConstraint(
            model_name="invitation",
            constraint=models.CheckConstraint(
                condition=models.Q(by_operator=False) | models.Q(invited_by__isnull=True),
                name="invitation_operator_has_no_inviter",
            ),
        ),
    ]
