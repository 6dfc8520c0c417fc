"""Found by an outside probe: the reasons an admin types on the suppression page (why an address
is suppressed, why it may receive mail again) took bidirectional controls and control
characters, which then showed reversed in the audit log every admin reads. They are refused as a
suspension's reason is (``common.text.unsafe_in_name``), with the same words."""

from __future__ import annotations

import pytest
from django.urls import reverse

from intents.models import Suppression
from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db

HOSTILE = [
    ("Unpaid \u202e711-4202 eciovni", "U+202E"),
    ("asked \u2067us\u2069 to stop", "U+2067"),
    ("asked\x1b[8m us to stop", "U+001B"),
    ("asked\tus", "U+0009"),
]


def _form(field, tenant):
    """(url, the data without the reason) of the form that takes ``field``."""
    if field == "note":
        return reverse("admin_suppression_add", args=[tenant.slug]), {"address": "ana@example.com"}
    suppression = Suppression.objects.create(
        tenant=tenant, address="ana@example.com", reason="manual", note="asked"
    )
    return reverse("admin_suppression_remove", args=[tenant.slug, suppression.pk]), {}


@pytest.mark.parametrize("field", ["note", "reason"])
@pytest.mark.parametrize(("text", "named"), HOSTILE, ids=[n for _t, n in HOSTILE])
def test_a_suppression_reason_with_a_control_or_bidi_character_is_refused(
    tenant_a, admin_a, signed_in, field, text, named
):
    url, data = _form(field, tenant_a)
    before = Suppression.objects.filter(tenant=tenant_a).count()

    response = signed_in(admin_a.user).post(url, {**data, field: text}, follow=True)

    assert f"A reason cannot hold the control character {named}." in response.content.decode()
    assert Suppression.objects.filter(tenant=tenant_a).count() == before
    assert not AuditEvent.objects.filter(tenant=tenant_a).exists()


@pytest.mark.parametrize("field", ["note", "reason"])
def test_a_suppression_reason_in_ordinary_text_of_any_script_is_kept(
    tenant_a, admin_a, signed_in, field
):
    text = "Pidi\u00f3 no\u00a0recibir\u00ad m\u00e1s \u0645\u06cc\u200c\u0634\u0648\u062f \u200f 👩\u200d💻"

    url, data = _form(field, tenant_a)

    signed_in(admin_a.user).post(url, {**data, field: text})

    assert AuditEvent.objects.get(tenant=tenant_a).data[field] == text
