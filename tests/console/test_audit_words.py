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
    }


def test_a_delivery_row_reads_as_the_delivery_states_label(tenant_a):
    with translation.override("en"):
        (line,) = audit_lines(tenant_a, [delivery_row("delivery.delivered")])
        (unknown,) = audit_lines(tenant_a, [delivery_row("delivery.opened")])

    assert line.sentence == "Delivery of send #999999: Delivered"
    assert unknown.sentence == "Delivery of send #999999: opened"
