"""In headless Chromium: an admin invites, copies the link once, the invitee creates the account
there and lands in the tenant; the same link opened again does nothing."""

import re

from tenants.models import Membership
from tests.browser import BROWSER_MARKS, sign_in

pytestmark = BROWSER_MARKS

NEW_PASSWORD = "a-long-enough-pass-42"


def test_invite_then_the_invitee_creates_the_account_and_signs_in(
    page, chromium, live_server, transactional_db, tenant_a, member_of
):
    admin = member_of(tenant_a, "admin")
    sign_in(page, admin.user)
    page.goto(f"/t/{tenant_a.slug}/admin/members/")
    page.fill("input[name=email]", "New.Hire@example.test")
    page.select_option("select[name=role]", "viewer")
    page.click("form.form-row button[type=submit]")
    link = page.locator("input[aria-label='One-time invitation link']").input_value()
    assert link.startswith(live_server.url + "/invitations/")
    assert page.locator("#invitations", has_text="new.hire@example.test").count() == 1
    assert not Membership.objects.filter(user__email="new.hire@example.test").exists()

    invitee = chromium.new_context(base_url=live_server.url).new_page()
    invitee.goto(link)
    invitee.fill("input[name=new_password1]", NEW_PASSWORD)
    invitee.fill("input[name=new_password2]", NEW_PASSWORD)
    invitee.click("#invitation button[type=submit]")
    invitee.wait_for_url("**/signin/")
    invitee.fill("input[name=username]", "new.hire@example.test")
    invitee.fill("input[name=password]", NEW_PASSWORD)
    invitee.click("button[type=submit]")
    invitee.wait_for_url(re.compile(rf"/t/{tenant_a.slug}/$"))
    assert Membership.objects.get(user__email="new.hire@example.test").role == "viewer"
    again = invitee.goto(link)
    assert again.status == 410
    assert invitee.locator("text=already used").count() == 1
    invitee.context.close()
