"""End to end in headless Chromium: sign in, review with the keyboard, follow the send in the outbox
(sent through the sandbox AgentMail by the real worker code), edit, reject, stale approve, rights.
"""

import re

from intents import services, tasks
from intents.models import Draft, SendIntent
from tests.browser import BROWSER_MARKS, new_draft, polled_until, sign_in
from webhooks.models import WebhookEvent

pytestmark = BROWSER_MARKS


def test_keyboard_approve_then_accepted_then_delivered_by_webhook(page, shop):
    draft = new_draft(shop, subject="Keyboard approval")
    page.clock.install()  # the status polls every 3 s: the test moves the clock on instead
    sign_in(page, shop["admin"].user)
    page.keyboard.press("j")
    page.keyboard.press("o")
    page.wait_for_url(f"**/drafts/{draft.pk}/")
    page.keyboard.press("a")
    page.wait_for_url(re.compile(r"/outbox/\d+/$"))
    intent = SendIntent.objects.get(draft=draft)
    assert tasks.drain() == 1
    polled_until(page, "[data-state=accepted]", every_ms=3_000)
    intent.refresh_from_db()
    assert intent.state == "accepted" and intent.provider_message_id
    assert page.locator("text=" + intent.provider_message_id).count() >= 1
    # No reload: the page keeps refreshing after acceptance until the recipient's delivery
    # settles, and the state comes from the sandbox's real Svix-signed webhook to our receiver.
    polled_until(page, "[data-delivery=delivered]", every_ms=3_000)
    assert intent.deliveries.get().state == "delivered"
    received = set(
        WebhookEvent.objects.filter(tenant=shop["tenant"]).values_list("event_type", flat=True)
    )
    assert {"message.sent", "message.delivered"} <= received


def test_help_lists_the_shortcuts(page, shop):
    new_draft(shop)
    sign_in(page, shop["admin"].user)
    page.keyboard.press("?")
    assert page.locator("dialog#shortcuts").is_visible()
    page.keyboard.press("?")
    assert not page.locator("dialog#shortcuts").is_visible()


def test_edit_then_approve(page, shop):
    draft = new_draft(shop)
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    page.keyboard.press("e")
    page.wait_for_url(f"**/drafts/{draft.pk}/edit/")
    page.fill(
        "textarea[name=text]", "Hello,\n\nWe refunded your whole order today.\n\nBest regards"
    )
    page.click("button.primary")
    page.wait_for_url(f"**/drafts/{draft.pk}/")
    assert page.locator("#diff ins", has_text="whole").count() == 1
    page.click("[data-approve]")
    page.wait_for_url(re.compile(r"/outbox/\d+/$"))
    assert SendIntent.objects.get(draft=draft).draft_version.number == 2


def test_reject_with_a_reason(page, shop):
    draft = new_draft(shop)
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    page.keyboard.press("r")
    page.keyboard.type("The amount is wrong")
    page.click(".reject-form button")
    page.wait_for_url(f"**/t/{shop['tenant'].slug}/")
    draft.refresh_from_db()
    assert (draft.status, draft.reject_reason) == ("rejected", "The amount is wrong")


def test_stale_approve_is_refused_with_the_diff(page, shop):
    draft = new_draft(shop)
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    services.draft_add_version(
        tenant=shop["tenant"],
        draft_id=draft.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text="Hello,\n\nWe refunded half of your order today.",
        html="",
        actor_user=shop["admin"].user,
    )
    page.keyboard.press("a")
    page.wait_for_selector("[data-refusal=stale_version]")
    assert page.locator(".stale-diff ins", has_text="half").count() == 1
    assert not SendIntent.objects.filter(draft=draft).exists()
    assert Draft.objects.get(pk=draft.pk).status == "pending"


def test_approver_without_right_has_no_approve_button(page, shop, member_of):
    limited = member_of(shop["tenant"], "approver", approve_all_mailboxes=False)
    draft = new_draft(shop)
    sign_in(page, limited.user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    assert page.locator("[data-approve]").count() == 0
    assert page.locator("[data-no-right]").is_visible()
    page.keyboard.press("a")
    assert Draft.objects.get(pk=draft.pk).status == "pending"
