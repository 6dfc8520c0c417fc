from django.db import migrations

# The journals are evidence: the database itself refuses to change or delete a row. Tenant deletion
# is not a product operation, so cascading deletes are not needed; TRUNCATE (test flushes) is not
# affected by row triggers.
SQL = """
CREATE OR REPLACE FUNCTION countersign_refuse_journal_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'journal table % is append-only', TG_TABLE_NAME;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER intentevent_append_only BEFORE UPDATE OR DELETE ON intents_intentevent
    FOR EACH ROW EXECUTE FUNCTION countersign_refuse_journal_change();
CREATE TRIGGER auditevent_append_only BEFORE UPDATE OR DELETE ON tenants_auditevent
    FOR EACH ROW EXECUTE FUNCTION countersign_refuse_journal_change();
"""

REVERSE = """
DROP TRIGGER IF EXISTS intentevent_append_only ON intents_intentevent;
DROP TRIGGER IF EXISTS auditevent_append_only ON tenants_auditevent;
DROP FUNCTION IF EXISTS countersign_refuse_journal_change();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("intents", "0002_initial"),
        ("tenants", "0001_initial"),
    ]

    operations = [migrations.RunSQL(SQL, REVERSE)]
