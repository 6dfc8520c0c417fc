"""In headless Chromium: the customer writes again (through the sandbox and its signed webhook)
while the reviewer has the draft open. Approve is refused with the new message named; the reviewer
follows the link, reads it in the thread and approves what they have now seen; the queue row said
so before the page was opened. Screenshots go to $SCREENSHOT_DIR when it is set."""

import os
import re
import time

from intents.models import SendIntent
from tests.browser import BROWSER_MARKS, sign_in
from webhooks.models import InboundMessage

pytestmark = BROWSER_MARKS


def _shot(page, name: str) -> None:
    folder = os.environ.get("SCREENSHOT_DIR")
    if folder:
        page.screenshot(path=os.path.join(folder, f"{name}.png"), full_page=True)


def _stored(message_id: str, seconds: float = 15) -> None:
    """Wait for the receiver and the applier beside the live server to store the message."""
    deadline = time.monotonic() + seconds
    while not InboundMessage.objects.filter(message_id=message_id).exists():
        assert time.monotonic() < deadline, f"{message_id} never reached the receiver"
        time.sleep(0.05)


def test_a_message_that_lands_while_the_draft_is_open_is_read_before_the_approval(
    page, shop, sandbox
):
    from intents import services

    mailbox, slug = shop["mailbox"], shop["tenant"].slug
    first = sandbox.inbound(
        mailbox.inbox_id,
        from_="Jane Doe <jane@customer.test>",
        subject="Refund for order 1182?",
        text="Could I get a refund?",
    )
    _stored(first["message_id"])
    draft = services.draft_create(
        tenant=shop["tenant"],
        mailbox=mailbox,
        to=["jane@customer.test"],
        text="Hello Jane,\n\nWe refunded order 1182 today.\n\nBest regards",
        thread_id=first["thread_id"],
        in_reply_to=first["message_id"],
        actor_user=shop["admin"].user,
    )
    # Another reply in the same thread, still waiting for review when the customer writes.
    later = services.draft_create(
        tenant=shop["tenant"],
        mailbox=mailbox,
        to=["jane@customer.test"],
        text="More news.",
        thread_id=first["thread_id"],
        in_reply_to=first["message_id"],
        actor_user=shop["admin"].user,
    )
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{slug}/drafts/{draft.pk}/")
    assert page.locator("text=The customer wrote again").count() == 0

    second = sandbox.inbound(
        mailbox.inbox_id,
        from_="Jane Doe <jane@customer.test>",
        subject="Please cancel the refund, I found the parcel",
        text="Sorry!",
        in_reply_to=first["message_id"],
    )
    _stored(second["message_id"])
    page.click("[data-approve]")

    # The page comes back whole: the refusal says why, the thread shows the new message.
    flash = page.locator(".flash", has_text="The customer wrote again")
    flash.wait_for()
    notice = page.locator("text=Please cancel the refund, I found the parcel").first
    assert notice.is_visible()
    assert page.locator(".thread .newer", has_text="jane@customer.test").count() == 1
    assert not SendIntent.objects.filter(draft=draft).exists()
    _shot(page, "wrote-again-refused")
    page.click("[data-approve]")
    page.wait_for_url(re.compile(r"/outbox/\d+/$"))
    assert SendIntent.objects.filter(draft=draft, held_reason="").count() == 1

    page.goto(f"/t/{slug}/")
    row = page.locator("article.qrow", has=page.locator(f'a[href$="/drafts/{later.pk}/"]'))
    assert row.locator("[data-wrote-again]").count() == 1
    _shot(page, "wrote-again-queue")
