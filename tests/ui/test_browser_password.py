"""In headless Chromium: a member finds the password page from their sessions, a wrong current
password is refused on the page, the right one changes it; their other browser is signed out,
this one stays signed in. axe finds no critical or serious violation on the page."""

import os
import re

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from tests.browser import BROWSER_MARKS, sign_in
from tests.factories import PASSWORD

pytestmark = BROWSER_MARKS

NEW = "a-fresh-pass-phrase-58"


def test_change_the_password_from_the_account_pages(
    page, chromium, live_server, transactional_db, tenant_a, member_of
):
    user = member_of(tenant_a, "approver").user
    elsewhere = chromium.new_context(base_url=live_server.url)
    other = elsewhere.new_page()
    sign_in(other, user)
    sign_in(page, user)

    page.goto("/account/sessions/")
    page.click("nav.subnav a:has-text('Password')")
    page.wait_for_url("**/account/password/")
    violations = [
        v["id"]
        for v in Axe().run(page).response["violations"]
        if v["impact"] in {"critical", "serious"}
    ]
    assert violations == []
    page.fill("input[name=old_password]", "not-the-password")
    page.fill("input[name=new_password1]", NEW)
    page.fill("input[name=new_password2]", NEW)
    page.click("button:has-text('Change password')")
    expect(page.locator("[role=alert]", has_text="entered incorrectly")).to_have_count(1)
    if shots := os.environ.get("SCREENSHOT_DIR"):
        page.screenshot(path=f"{shots}/password-refused.png", full_page=True)

    page.fill("input[name=old_password]", PASSWORD)
    page.fill("input[name=new_password1]", NEW)
    page.fill("input[name=new_password2]", NEW)
    page.click("button:has-text('Change password')")
    page.wait_for_url("**/account/sessions/")
    assert page.locator(".flash", has_text="Your password is changed").count() == 1
    assert page.locator("#sessions li").count() == 1
    if shots:
        page.screenshot(path=f"{shots}/password-changed.png", full_page=True)

    other.goto(f"/t/{tenant_a.slug}/")
    assert re.search(r"/signin/", other.url)
    elsewhere.close()
    page.goto(f"/t/{tenant_a.slug}/")
    assert page.url.endswith(f"/t/{tenant_a.slug}/")
