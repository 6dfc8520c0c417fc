"""The counters of what happened before they existed, from the history tables (once, here; from
now on the writers add to them in the transaction of each change). Idempotent replays and webhook
duplicates left no rows behind: they start at zero."""

from django.db import migrations

BACKFILL = """
INSERT INTO common_counter (tenant_id, name, labels, shard, n)
SELECT tenant_id, 'attempts', jsonb_build_object('kind', kind, 'outcome', outcome), 0, count(*)
  FROM intents_sendattempt WHERE outcome <> 'pending' GROUP BY tenant_id, kind, outcome
UNION ALL
SELECT tenant_id, 'provider_429', '{}'::jsonb, 0, count(*)
  FROM intents_sendattempt WHERE http_status = 429 GROUP BY tenant_id
UNION ALL
SELECT tenant_id, 'intents_finished', jsonb_build_object('state', state), 0, count(*)
  FROM intents_sendintent WHERE state IN ('accepted', 'failed', 'blocked', 'expired', 'cancelled') GROUP BY tenant_id, state
UNION ALL
SELECT tenant_id, 'reconciliations', jsonb_build_object('result', to_state), 0, count(*)
  FROM intents_intentevent
  WHERE action LIKE 'intent.%' AND from_state = 'uncertain' AND to_state NOT IN ('uncertain', '')
  GROUP BY tenant_id, to_state
ON CONFLICT ON CONSTRAINT counter_unique_slice DO UPDATE SET n = common_counter.n + excluded.n
"""


class Migration(migrations.Migration):
    dependencies = [
        ("common", "0001_metric_counters"),
        ("intents", "0010_ownership_and_deadlines"),
    ]

    operations = [
        migrations.RunSQL(BACKFILL, reverse_sql="DELETE FROM common_counter"),
    ]
