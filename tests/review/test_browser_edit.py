"""In headless Chromium: a textarea is submitted with CRLF line endings (the HTML form encoding);
a one-word edit must still show as a one-word change, and the stored body holds LF only."""

from intents.models import DraftVersion
from tests.browser import BROWSER_MARKS, new_draft, sign_in

pytestmark = BROWSER_MARKS


def test_a_one_word_edit_in_the_browser_is_a_one_word_diff(page, shop):
    draft = new_draft(shop, text="Hello,\n\nWe refunded your order today.\n\nBest regards")
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/edit/")
    page.fill("textarea[name=text]", "Hello,\n\nWe refunded your order yesterday.\n\nBest regards")
    page.click("button.primary")
    page.wait_for_url(f"**/drafts/{draft.pk}/")

    saved = DraftVersion.objects.get(draft=draft, number=2)
    assert saved.text == "Hello,\n\nWe refunded your order yesterday.\n\nBest regards"
    assert page.locator("#diff pre del").all_inner_texts() == ["today."]
    assert page.locator("#diff pre ins").all_inner_texts() == ["yesterday."]
