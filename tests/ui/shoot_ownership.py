"""Screenshots of the ownership and deadline views for docs/screenshots (run on demand):

COUNTERSIGN_ENV=test .venv/bin/pytest tests/ui/shoot_ownership.py
"""

from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from intents import services
from intents.models import Draft
from tenants.models import Tenant
from tests.browser import sign_in
from tests.factories import make_local_mailbox

OUT = Path(settings.BASE_DIR) / "docs" / "screenshots"
pytestmark = pytest.mark.browser


def _build(tenant, member_of):
    Tenant.objects.filter(pk=tenant.pk).update(name="Acme Support", sla_minutes=120)
    mailbox = make_local_mailbox(tenant)
    ana = member_of(tenant, "approver", user__full_name="Ana Approver").user
    ben = member_of(tenant, "admin", user__full_name="Ben Lead").user
    subjects = [
        "Where is my refund for order #48213?",
        "Wrong size delivered",
        "Cancel my subscription",
        "Invoice address change",
        "Damaged parcel",
    ]
    drafts = [
        services.draft_create(
            tenant=tenant,
            mailbox=mailbox,
            to=[f"customer{i}@example.com"],
            subject=s,
            text="Hello,\n\nThanks for writing.",
            actor_user=ben,
        )
        for i, s in enumerate(subjects)
    ]
    now = timezone.now()
    services.draft_take(tenant=tenant, draft_id=drafts[0].pk, actor=ana)
    services.draft_hand(tenant=tenant, draft_id=drafts[1].pk, actor=ben, to_user=ben)
    Draft.objects.filter(pk=drafts[2].pk).update(
        sla_due_at=now - timedelta(minutes=12),
        escalated_at=now,
        assignee=ben,
        assigned_how="escalated",
    )
    Draft.objects.filter(pk=drafts[3].pk).update(
        sla_due_at=now + timedelta(minutes=9), sla_warn_at=now - timedelta(minutes=20)
    )
    return ana, ben, drafts


def test_shoot_ownership(page, transactional_db, tenant_a, member_of):
    _ana, ben, drafts = _build(tenant_a, member_of)
    sign_in(page, ben)
    slug = tenant_a.slug
    shots = {
        "ui-queue-ownership": f"/t/{slug}/?sort=due",
        "ui-queue-mine": f"/t/{slug}/?view=mine",
        "ui-draft-ownership": f"/t/{slug}/drafts/{drafts[0].pk}/",
        "ui-admin-deadlines": f"/t/{slug}/admin/policies/#deadlines",
    }
    OUT.mkdir(parents=True, exist_ok=True)
    for width, suffix in ((1280, "desktop"), (390, "phone")):
        page.set_viewport_size({"width": width, "height": 900})
        for name, url in shots.items():
            page.goto(url)
            page.screenshot(path=str(OUT / f"{name}-{suffix}.png"), full_page=True)
