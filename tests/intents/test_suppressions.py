"""intents.services.suppressions: the one writer of the suppression list."""

import pytest

from intents.models import Suppression
from intents.services.suppressions import suppressions_record

pytestmark = pytest.mark.django_db


def test_a_rejection_never_changes_an_existing_entry(tenant_a):
    Suppression.objects.create(tenant=tenant_a, address="b@x.test", reason="bounced", source="s")
    Suppression.objects.create(tenant=tenant_a, address="m@x.test", reason="manual", source="p")

    changed = suppressions_record(
        tenant_id=tenant_a.pk,
        addresses=["b@x.test", "m@x.test", "new@x.test"],
        reason=Suppression.Reason.REJECTED,
        source="intent:1",
    )

    assert changed == ["new@x.test"]
    assert dict(Suppression.objects.values_list("address", "reason")) == {
        "b@x.test": "bounced",
        "m@x.test": "manual",
        "new@x.test": "rejected",
    }


def test_a_complaint_strengthens_a_bounce_but_not_a_manual_entry(tenant_a):
    Suppression.objects.create(tenant=tenant_a, address="b@x.test", reason="bounced", source="s")
    Suppression.objects.create(tenant=tenant_a, address="m@x.test", reason="manual", source="p")

    changed = suppressions_record(
        tenant_id=tenant_a.pk,
        addresses=["m@x.test", "b@x.test"],
        reason=Suppression.Reason.COMPLAINED,
        source="evt_1",
        note="message.complained webhook",
    )

    assert changed == ["b@x.test"]
    assert Suppression.objects.get(address="b@x.test").reason == "complained"
