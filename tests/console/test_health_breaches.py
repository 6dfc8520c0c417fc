"""The health panel counts deadline breaches per mailbox and per reviewer."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone

from console import selectors
from intents.models import Draft
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


def test_breaches_per_mailbox_and_reviewer(
    tenant_a, mailbox_a, make_draft, admin_a, member_of, client
):
    ana = member_of(tenant_a, "approver", user__full_name="Ana Approver").user
    other_mailbox = make_local_mailbox(tenant_a, username="billing")
    now = timezone.now()
    held_breach, decided_late, decided_in_time, not_due, unowned = (
        make_draft(mailbox_a) for _ in range(5)
    )
    Draft.objects.filter(pk=held_breach.pk).update(
        sla_due_at=now - timedelta(hours=1), sla_breach_holder=ana, sla_breached_at=now
    )
    Draft.objects.filter(pk=decided_late.pk).update(
        sla_due_at=now - timedelta(hours=2),
        status="rejected",
        decided_by=admin_a.user,
        decided_at=Now(),
    )
    Draft.objects.filter(pk=decided_in_time.pk).update(
        sla_due_at=now - timedelta(minutes=5),
        status="rejected",
        decided_by=ana,
        decided_at=now - timedelta(hours=1),
    )
    Draft.objects.filter(pk=not_due.pk).update(sla_due_at=now + timedelta(hours=1))
    Draft.objects.filter(pk=unowned.pk).update(
        mailbox=other_mailbox, sla_due_at=now - timedelta(minutes=1)
    )
    health = selectors.health(tenant_a)
    assert sorted(health.breaches_by_mailbox) == sorted(
        [(mailbox_a.address, 2), (other_mailbox.address, 1)]
    )
    assert sorted(health.breaches_by_reviewer) == sorted(
        [("Ana Approver", 1), (admin_a.user.display_name, 1), ("", 1)]
    )
    client.force_login(admin_a.user)
    page = client.get(reverse("admin_home", args=[tenant_a.slug])).content.decode()
    assert "Deadline breaches per reviewer" in page
    assert "nobody held it" in page


def test_another_tenants_breaches_are_not_counted(tenant_a, tenant_b, mailbox_b, make_draft):
    draft = make_draft(mailbox_b)
    Draft.objects.filter(pk=draft.pk).update(sla_due_at=timezone.now() - timedelta(minutes=1))
    health = selectors.health(tenant_a)
    assert health.breaches_by_mailbox == [] and health.breaches_by_reviewer == []
