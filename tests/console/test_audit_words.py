"""The audit page's sentence of a delivery row names the state as its badges do, translated,
not the code's last word."""

import pytest
from django.utils import timezone, translation

from console.audit_words import audit_lines

pytestmark = pytest.mark.django_db


def delivery_row(action: str) -> dict:
    return {
        "obj_type": "sendintent",
        "obj_id": "999999",
        "data": {"moved": ["maria@example.com"]},
        "action": action,
        "actor_display": "webhook",
        "created_at": timezone.now(),
        "src": "intent",
        "reason": "",
        "actor_kind": "",
    }


def test_a_delivery_row_reads_as_the_delivery_states_label(tenant_a):
    with translation.override("en"):
        (line,) = audit_lines(tenant_a, [delivery_row("delivery.delivered")])
        (unknown,) = audit_lines(tenant_a, [delivery_row("delivery.opened")])

    assert line.sentence == "Delivery of send #999999: Delivered"
    assert unknown.sentence == "Delivery of send #999999: opened"


def signin_row(action: str, data: dict) -> dict:
    return {
        "obj_type": "user",
        "obj_id": "1",
        "data": data,
        "action": action,
        "actor_display": "ana@example.test",
        "created_at": timezone.now(),
        "src": "signin",
        "reason": "",
        "actor_kind": "",
    }


def test_the_signin_rows_details_are_named_and_their_codes_read_as_words(tenant_a):
    """Found by an outside probe: a member's first sign-in through the identity provider read
    "sends created: yes" (the key a broadcast's rows use), and the sign-in rows' other details
    showed their keys and codes ("factor: recovery_code")."""
    rows = [
        signin_row(
            "signin.sso_linked",
            {"issuer": "https://idp.example.test", "created": True, "replaced_links": 1},
        ),
        signin_row("signin.second_factor_verified", {"factor": "recovery_code"}),
        signin_row("signin.reauthenticated", {"method": "sso"}),
    ]
    with translation.override("en"):
        linked, verified, again = audit_lines(tenant_a, rows)

    assert dict(linked.details) == {
        "identity provider": "https://idp.example.test",
        "new account": "yes",
        "links to an earlier provider removed": "1",
    }
    assert verified.details == [("second factor", "recovery code")]
    assert again.details == [("how", "single sign-on")]
