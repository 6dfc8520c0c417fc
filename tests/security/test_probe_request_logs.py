"""Django's own request log lines (``django.request``, ``django.security.*``) pass the request
itself as an ``extra`` field, and its repr is the full path with the query string. An SSO
callback refused before its code was exchanged (the session lost its flow, a stale tab) wrote
the identity provider's authorization code and state into the operators' log, both still
unused."""

import json
import logging

import pytest
from django.test import Client

from config.logging import KeyValueFormatter
from tenants.invitations import invitation_create

pytestmark = pytest.mark.django_db

CODE = "authz-code-0f3e9a71c2"
STATE = "flow-state-5b8d2c64e0"


def _lines(records) -> list[str]:
    return [
        formatter.format(record)
        for record in records
        for formatter in (KeyValueFormatter(), KeyValueFormatter(json_lines=True))
    ]


def test_a_refused_sso_callback_logs_its_path_but_not_its_code_or_state(caplog):
    caplog.set_level(logging.DEBUG)

    answer = Client().get(f"/sso/callback/?code={CODE}&state={STATE}")
    lines = _lines(caplog.records)
    logged = [json.loads(line) for line in lines if line.startswith("{")]
    requests = [line["request"] for line in logged if line["logger"] == "django.request"]

    assert answer.status_code == 400
    assert requests == ["<WSGIRequest: GET '/sso/callback/'>"]
    assert not any(CODE in line or STATE in line for line in lines)


def test_a_live_invitation_link_answered_with_an_error_stays_out_of_the_log(
    tenant_a, admin_a, caplog
):
    """The invitation link's path is its secret. Any answer of 400 or more to it is logged with
    the path (a POST's 405 here; a 500 on a database hiccup alike), while the link still opens."""
    _invitation, token = invitation_create(
        tenant=tenant_a, email="invitee@example.test", role="viewer", actor=admin_a.user
    )
    caplog.set_level(logging.DEBUG)

    answer = Client().post(f"/invitations/{token}/")
    lines = _lines(caplog.records)

    assert answer.status_code == 405
    assert any("/invitations/[redacted]/" in line for line in lines)
    assert not any(token in line for line in lines)
    assert Client().get(f"/invitations/{token}/").status_code == 302
