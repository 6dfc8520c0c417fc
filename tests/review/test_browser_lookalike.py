"""In headless Chromium: a queue row whose recipient holds a letter outside ASCII is marked, and
"Approve selected" leaves it out with the letter named, while the plain row beside it is approved.
Screenshots go to $SCREENSHOT_DIR when it is set."""

import os

from intents.models import SendIntent
from tests.browser import BROWSER_MARKS, new_draft, sign_in

pytestmark = BROWSER_MARKS

LOOKALIKE = "b\u0456lling@example.com"  # a Cyrillic small i (U+0456), not "billing"


def _shot(page, name: str) -> None:
    folder = os.environ.get("SCREENSHOT_DIR")
    if folder:
        page.screenshot(path=os.path.join(folder, f"{name}.png"), full_page=True)


def test_select_all_leaves_the_lookalike_recipient_to_its_page(page, shop):
    plain = new_draft(shop, to=["billing@example.com"], subject="Your invoice")
    lookalike = new_draft(shop, to=[LOOKALIKE], subject="Your invoice, again")
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/")

    def row(draft):
        return page.locator("article.qrow", has=page.locator(f'a[href$="/drafts/{draft.pk}/"]'))

    assert row(lookalike).locator("[data-lookalike]").is_visible()
    assert row(plain).locator("[data-lookalike]").count() == 0
    _shot(page, "lookalike-queue")
    page.check("[data-select-all]")
    page.click("[data-bulk-approve]")

    left_out = row(lookalike).locator('[data-bulk-result="refused"]')
    left_out.wait_for()
    assert "U+0456 CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I" in left_out.inner_text()
    assert row(plain).locator('[data-bulk-result="approved"]').is_visible()
    _shot(page, "lookalike-bulk-left-out")
    assert SendIntent.objects.filter(draft=plain).count() == 1
    assert not SendIntent.objects.filter(draft=lookalike).exists()
