"""In headless Chromium: the health panel shows the webhook apply lag (store first), in English
and in German."""

import os
from datetime import timedelta

import pytest
from django.db.models import F
from django.db.models.functions import Now

from tests.browser import BROWSER_MARKS, sign_in
from webhooks.models import WebhookEndpoint, WebhookEvent

pytestmark = [*BROWSER_MARKS, pytest.mark.without_webhook_applier]


def test_the_health_panel_shows_how_long_stored_events_wait_for_the_applier(
    page, live_server, transactional_db, tenant_a, member_of
):
    admin = member_of(tenant_a, "admin")
    endpoint = WebhookEndpoint.objects.create(tenant=tenant_a)
    for svix_id, state, waited, applied_after in (
        ("msg_waiting", "pending", 95, None),
        ("msg_done", "applied", 300, 2),
    ):
        WebhookEvent.objects.create(
            endpoint=endpoint,
            tenant=tenant_a,
            svix_id=svix_id,
            event_type="message.delivered",
            state=state,
        )
        WebhookEvent.objects.filter(svix_id=svix_id).update(
            received_at=Now() - timedelta(seconds=waited)
        )
        if applied_after is not None:
            WebhookEvent.objects.filter(svix_id=svix_id).update(
                applied_at=F("received_at") + timedelta(seconds=applied_after)
            )
    sign_in(page, admin.user)

    page.goto(f"/t/{tenant_a.slug}/admin/")
    tile = page.locator("[data-apply-lag]")
    english = tile.inner_text()
    if shots := os.environ.get("SCREENSHOT_DIR"):
        page.screenshot(path=f"{shots}/health-apply-lag.png", full_page=True)
    page.context.set_extra_http_headers({"Accept-Language": "de"})
    page.goto(f"/t/{tenant_a.slug}/admin/")
    german = page.locator("[data-apply-lag]").inner_text()

    assert english.split() == ["Apply", "lag", "1", "min", "max", "2", "s,", "last", "hour"]
    assert "is-warn" in (tile.get_attribute("class") or "")
    assert german.split()[:1] == ["Verarbeitungsverzug"]
    assert "letzte Stunde" in german
