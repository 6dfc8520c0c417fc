"""The production log line (config.logging.KeyValueFormatter, LOG_JSON): the ids an operator acts
on are shown, the secrets beside them are not."""

import json
import logging

import pytest
from django.test import Client

from config.logging import KeyValueFormatter
from tenants.models import AgentToken
from tenants.tokens import token_create

pytestmark = pytest.mark.django_db


def test_a_rate_limited_token_is_named_by_its_id_and_its_secret_stays_out(
    tenant_a, member_of, settings, caplog
):
    """Found by an outside probe: every field whose name held "token" or "secret" was masked, ids
    included, so the operator read ``token_id: [redacted]`` and could not tell which agent was
    throttled (nor, on ``webhooks.secret.unreadable``, which secret to replace)."""
    settings.API_RATE_LIMIT_PER_MINUTE = 1
    admin = member_of(tenant_a, "admin").user
    _, secret = token_create(
        tenant=tenant_a,
        name="noisy agent",
        scopes=["drafts:read"],
        mailbox_ids=[],
        expires_at=None,
        actor=admin,
    )
    token = AgentToken.objects.get(tenant=tenant_a)
    caplog.set_level(logging.INFO)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")

    answers = [api.get("/api/v1/mailboxes").status_code for _ in range(2)]
    lines = [KeyValueFormatter(json_lines=True).format(record) for record in caplog.records]
    limited = [json.loads(line) for line in lines if "intents.api.rate_limited" in line]
    masked = KeyValueFormatter(json_lines=True).format(
        logging.makeLogRecord({"msg": "probe", "token": secret, "client_secret": "s3cr3t"})
    )

    assert answers == [200, 429]
    assert [(line["token_id"], line["tenant_id"]) for line in limited] == [(token.pk, tenant_a.pk)]
    assert not any(secret in line for line in lines)
    assert json.loads(masked)["token"] == json.loads(masked)["client_secret"] == "[redacted]"


def test_the_sweeps_counters_are_shown_on_its_log_line(caplog):
    """Found running ``make run``: the sweep logged ``api_keys_purged='[redacted]'`` (its count of
    purged idempotency records matched the "api_key" secret rule), so the operator could not see
    how many it purged. Every counter of the report is a number the line shows."""
    from intents.tasks import sweep_once

    caplog.set_level(logging.INFO)
    report = sweep_once()
    record = logging.LogRecord(
        "intents.tasks", logging.INFO, "", 0, "intents.sweep.done", None, None
    )
    record.__dict__.update({key: 7 for key in report})

    shown = json.loads(KeyValueFormatter(json_lines=True).format(record))

    assert {key: shown[key] for key in report} == {key: 7 for key in report}
