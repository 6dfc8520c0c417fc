"""Four-eyes on edit in headless Chromium: the editor's Approve is disabled, says why, and the
keyboard shortcuts do not approve either."""

from intents.models import Draft, SendIntent
from tests.browser import BROWSER_MARKS, new_draft, sign_in

pytestmark = BROWSER_MARKS


def test_the_editor_cannot_approve_by_click_or_key_and_is_told_why(page, shop):
    tenant = shop["tenant"]
    tenant.second_approver_on_edit = True
    tenant.save(update_fields=["second_approver_on_edit"])
    draft = new_draft(shop, actor_user=shop["admin"].user)
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{tenant.slug}/drafts/{draft.pk}/")

    approve = page.get_by_role("button", name="Approve a", exact=True)
    reason = page.locator("#approve-blocked")
    assert approve.is_disabled()
    assert page.locator("[data-approve-next]").is_disabled()
    assert reason.is_visible()
    assert "another person to approve it" in approve.evaluate(
        "b => document.getElementById(b.getAttribute('aria-describedby')).textContent"
    )
    page.keyboard.press("a")
    page.keyboard.press("n")
    page.wait_for_timeout(500)
    assert page.url.endswith(f"/drafts/{draft.pk}/")
    assert Draft.objects.get(pk=draft.pk).status == "pending"
    assert not SendIntent.objects.filter(draft=draft).exists()
