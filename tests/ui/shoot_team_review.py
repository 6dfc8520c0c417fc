"""Screenshots of undo, notes and presence for docs/screenshots (run on demand, not in CI):

COUNTERSIGN_ENV=test TEST_DATABASE_NAME=test_ui_team .tools/bin/uv run pytest tests/ui/shoot_team_review.py
"""

from pathlib import Path

import pytest
from django.conf import settings

from intents import services
from intents.models import SendIntent
from intents.services.presence import presence_beat
from tenants.models import Tenant
from tests.browser import sign_in

OUT = Path(settings.BASE_DIR) / "docs" / "screenshots"
pytestmark = pytest.mark.browser


def test_shoot_undo_notes_presence(chromium, live_server, shop, member_of):
    Tenant.objects.filter(pk=shop["tenant"].pk).update(send_hold_seconds=60, name="Acme Support")
    tenant = Tenant.objects.get(pk=shop["tenant"].pk)
    admin = shop["admin"].user
    admin.full_name = "Ana Admin"
    admin.save(update_fields=["full_name"])
    ben = member_of(tenant, "approver").user
    ben.full_name = "Ben Reviewer"
    ben.save(update_fields=["full_name"])
    draft = services.draft_create(
        tenant=tenant,
        mailbox=shop["mailbox"],
        to=["maria.lopez@example.com"],
        subject="Your refund for order #48213",
        text="Hello Maria,\n\nWe refunded your order today.\n\nBest regards,\nAcme Support",
        actor_user=ben,
    )
    services.draft_note_add(
        tenant=tenant,
        draft_id=draft.pk,
        author=ben,
        text="Checked with billing: 49.90 EUR is right.",
    )
    services.draft_note_add(
        tenant=tenant,
        draft_id=draft.pk,
        author=admin,
        text="She wrote twice; this answers the second message.",
    )
    version = draft.versions.get()
    services.draft_approve(
        tenant=tenant,
        draft_id=draft.pk,
        version=1,
        content_hash=version.content_hash,
        actor=admin,
    )
    presence_beat(tenant=tenant, draft_id=draft.pk, user=ben, mode="viewing")
    OUT.mkdir(parents=True, exist_ok=True)
    for name, width in (("desktop", 1280), ("phone", 390)):
        context = chromium.new_context(
            viewport={"width": width, "height": 900}, base_url=live_server.url
        )
        page = context.new_page()
        sign_in(page, admin)
        page.goto(f"/t/{tenant.slug}/drafts/{draft.pk}/")
        page.wait_for_selector(f'[data-presence] [data-present="{ben.email}"]')
        page.screenshot(path=str(OUT / f"ui-draft-undo-notes-presence-{name}.png"), full_page=True)
        page.goto(f"/t/{tenant.slug}/outbox/")
        page.screenshot(path=str(OUT / f"ui-outbox-undo-{name}.png"), full_page=True)
        context.close()
    other = services.draft_create(
        tenant=tenant,
        mailbox=shop["mailbox"],
        to=["jonas.weber@example.com"],
        subject="Re: Lieferung verspätet",
        text="Hallo Jonas,\n\nIhre Bestellung ist unterwegs.\n\nViele Grüße",
        actor_user=admin,
    )
    presence_beat(tenant=tenant, draft_id=other.pk, user=ben, mode="editing")
    for name, width in (("desktop", 1280), ("phone", 390)):
        context = chromium.new_context(
            viewport={"width": width, "height": 900}, base_url=live_server.url
        )
        page = context.new_page()
        sign_in(page, admin)
        page.screenshot(path=str(OUT / f"ui-queue-presence-{name}.png"), full_page=True)
        page.goto(f"/t/{tenant.slug}/drafts/{other.pk}/edit/")
        page.screenshot(path=str(OUT / f"ui-edit-presence-warning-{name}.png"), full_page=True)
        context.close()
    assert SendIntent.objects.get(draft=draft).state == "queued"
