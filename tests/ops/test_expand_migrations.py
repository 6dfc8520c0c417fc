"""DEPLOYMENT.md "Upgrading": the new release's migrations run while the release before still
records, so a column they add is nullable or has a database default (a Python ``default`` is
not one: Django drops it from the column once the existing rows are filled), or every INSERT of
the old code, which does not name the column, is refused."""

import pytest
from django.apps import apps
from django.conf import settings
from django.db import connection, migrations
from django.db.migrations.loader import MigrationLoader
from django.db.models.fields import NOT_PROVIDED

from tests.factories import make_local_mailbox

# Added before the rule was checked; each ran once, long before a release that could meet them.
BEFORE_THE_CHECK = {
    ("intents", "0002_initial"),
    ("intents", "0010_ownership_and_deadlines"),
    ("intents", "0027_draftattachment_forwarded_from_message"),
    ("mailboxes", "0002_initial"),
    ("mailboxes", "0003_sla_override_and_auto_assign"),
    ("mailboxes", "0005_mailbox_provider_display_name_and_sync"),
    ("mailboxes", "0008_mailbox_key_refused"),
    ("tenants", "0004_user_language_and_time_zone"),
    ("tenants", "0005_tenant_own_domains"),
    ("tenants", "0006_send_hold_seconds"),
    ("tenants", "0007_sla_escalation_and_away"),
    ("tenants", "0008_sign_in_factors_passkeys_sso_sessions"),
    ("tenants", "0009_agent_token_all_mailboxes"),
}


def test_no_migration_adds_a_column_the_release_before_cannot_insert_without():
    root = str(settings.BASE_DIR)
    ours = {
        app.label
        for app in apps.get_app_configs()
        if app.path.startswith(root) and "site-packages" not in app.path
    }
    loader = MigrationLoader(None, ignore_no_migrations=True)
    refused = [
        f"{app}.{name}: {op.model_name}.{op.name}"
        for (app, name), migration in sorted(loader.disk_migrations.items())
        if app in ours and (app, name) not in BEFORE_THE_CHECK
        for op in migration.operations
        if isinstance(op, migrations.AddField)
        and not op.field.null
        and not op.field.many_to_many
        and op.field.db_default is NOT_PROVIDED
    ]
    assert refused == []


@pytest.mark.django_db
def test_an_inbound_message_recorded_by_the_release_before_reply_to_gets_an_empty_list(
    tenant_a,
):
    """The INSERT of the release before webhooks 0015: every column but reply_to."""
    mailbox = make_local_mailbox(tenant_a)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO webhooks_inboundmessage (tenant_id, mailbox_id, thread_id, message_id,"
            " sender, subject, preview, received_at) VALUES (%s, %s, '', '<old@release.test>',"
            " 'customer@example.com', 'Hello', '', now()) RETURNING reply_to",
            [tenant_a.pk, mailbox.pk],
        )
        reply_to = cursor.fetchone()[0]
    assert reply_to in ([], "[]")
