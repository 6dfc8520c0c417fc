"""Screenshots of the admin home (health) and the members page in German at 1280 px and in
Spanish at 390 px, each reader in their own zone, for docs/screenshots (run on demand, not in CI):

COUNTERSIGN_ENV=test .tools/bin/uv run pytest tests/console/shoot_console_language.py
"""

from pathlib import Path

import pytest
from django.conf import settings

from console import services as admin_services
from tenants import invitations
from tests.browser import sign_in
from tests.factories import make_local_mailbox

OUT = Path(settings.BASE_DIR) / "docs" / "screenshots"
pytestmark = pytest.mark.browser
READERS = {
    # language: (viewport, time zone, file suffix)
    "de": ({"width": 1280, "height": 900}, "Europe/Berlin", "de-desktop"),
    "es": ({"width": 390, "height": 844}, "America/Mexico_City", "es-phone"),
}


@pytest.mark.parametrize("lang", READERS)
def test_shoot(chromium, live_server, transactional_db, tenant_a, member_of, make_draft, lang):
    viewport, zone, suffix = READERS[lang]
    tenant_a.name = "Acme Support"
    tenant_a.save(update_fields=["name"])
    mailbox = make_local_mailbox(tenant_a, username="acme-support")
    admin = member_of(tenant_a, "admin")
    admin.user.full_name, admin.user.language, admin.user.time_zone = "Ada Admin", lang, zone
    admin.user.save(update_fields=["full_name", "language", "time_zone"])
    limited = member_of(tenant_a, "approver", approve_all_mailboxes=False)
    limited.user.full_name = "Arthur Approver"
    limited.user.save(update_fields=["full_name"])
    limited.approve_mailboxes.set([mailbox])
    viewer = member_of(tenant_a, "viewer")
    viewer.user.full_name = "Vera Viewer"
    viewer.user.save(update_fields=["full_name"])
    invitations.invitation_create(
        tenant=tenant_a, email="new.hire@acme.test", role="approver", actor=admin.user
    )
    admin_services.suppression_add(
        tenant=tenant_a, address="legal@competitor.test", note="Asked not to", actor=admin.user
    )
    for _n in range(3):
        make_draft(mailbox)
    context = chromium.new_context(base_url=live_server.url, viewport=viewport, timezone_id=zone)
    page = context.new_page()
    sign_in(page, admin.user)
    OUT.mkdir(parents=True, exist_ok=True)
    for name, path in (("health", "/t/{slug}/admin/"), ("members", "/t/{slug}/admin/members/")):
        page.goto(path.format(slug=tenant_a.slug))
        page.screenshot(path=str(OUT / f"ui-admin-{name}-{suffix}.png"), full_page=True)
    context.close()
