"""In headless Chromium: a member whose sign-in is older than SUDO_SECONDS signs out their other
browser from the sessions page; they are asked to confirm it is them (nothing was done), a wrong
password is refused on the page, the right one brings them back, and signing out the other
browser then works. axe finds no critical or serious violation on the confirm page."""

import os
from datetime import timedelta

from axe_playwright_python.sync_playwright import Axe
from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore
from django.utils import timezone
from playwright.sync_api import expect

from tenants.models import UserSession
from tenants.user_sessions import PROVEN_AT_KEY
from tests.browser import BROWSER_MARKS, sign_in
from tests.factories import PASSWORD

pytestmark = BROWSER_MARKS


def age_proof(context):
    key = next(c["value"] for c in context.cookies() if c["name"] == settings.SESSION_COOKIE_NAME)
    session = SessionStore(session_key=key)
    session[PROVEN_AT_KEY] = (
        timezone.now() - timedelta(seconds=settings.SUDO_SECONDS + 1)
    ).isoformat()
    session.save()


def test_a_stale_sign_in_confirms_before_ending_another_session(
    page, chromium, live_server, transactional_db, tenant_a, member_of
):
    user = member_of(tenant_a, "approver").user
    elsewhere = chromium.new_context(base_url=live_server.url)
    sign_in(elsewhere.new_page(), user)
    sign_in(page, user)
    age_proof(page.context)
    shots = os.environ.get("SCREENSHOT_DIR")

    page.goto("/account/sessions/")
    page.locator("#sessions li form button").click()
    page.wait_for_url("**/account/confirm/?next=*")
    expect(page.locator(".flash", has_text="Nothing was changed")).to_have_count(1)
    violations = [
        v["id"]
        for v in Axe().run(page).response["violations"]
        if v["impact"] in {"critical", "serious"}
    ]
    assert violations == []
    if shots:
        page.screenshot(path=f"{shots}/sudo-confirm.png", full_page=True)
    page.fill("input[name=password]", "not-the-password")
    page.click("button:has-text('Confirm')")
    expect(page.locator("[role=alert]", has_text="That password is not right.")).to_have_count(1)
    if shots:
        page.screenshot(path=f"{shots}/sudo-refused.png", full_page=True)
    assert UserSession.objects.filter(user=user).count() == 2

    page.fill("input[name=password]", PASSWORD)
    page.click("button:has-text('Confirm')")
    page.wait_for_url("**/account/sessions/")
    page.locator("#sessions li form button").click()
    expect(page.locator(".flash", has_text="That session is signed out.")).to_have_count(1)
    assert UserSession.objects.filter(user=user).count() == 1
    elsewhere.close()
