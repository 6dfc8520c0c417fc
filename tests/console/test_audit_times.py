"""The audit page shows the times that journal rows hold (a deadline, the end of an undo window,
a cleared send-by time) in the reader's zone, like every other time on the page: they showed as
the stored UTC ISO string ("2026-12-07T13:00:00.123456+00:00") to a reviewer in Berlin."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from intents import services
from intents.services import deadlines
from tenants.models import Tenant
from tenants.templatetags.zones import zoned
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db

SECOND = timedelta(seconds=1)


def test_a_deadline_in_the_journal_is_shown_in_the_readers_zone(tenant_a, member_of, signed_in):
    Tenant.objects.filter(pk=tenant_a.pk).update(sla_minutes=60, sla_warning_minutes=15)
    tenant_a.refresh_from_db()
    admin = member_of(tenant_a, "admin").user
    admin.time_zone = "Europe/Berlin"
    admin.save(update_fields=["time_zone"])
    draft = services.draft_create(
        tenant=tenant_a,
        mailbox=make_local_mailbox(tenant_a),
        to=["customer@example.com"],
        subject="Your refund",
        text="We refunded your order.",
        actor_user=admin,
    )
    deadlines.drafts_warn_due(now=draft.sla_warn_at + SECOND)
    deadlines.drafts_escalate_due(now=draft.sla_due_at + SECOND)

    page = signed_in(admin).get(reverse("admin_audit", args=[tenant_a.slug]))

    body = page.content.decode()
    with timezone.override("Europe/Berlin"):
        shown = zoned(draft.sla_due_at)
    assert page.status_code == 200
    assert draft.sla_due_at.isoformat() not in body
    assert body.count(shown) >= 2, shown
