"""In Chromium: a note that fits the note box is saved, however many lines it has. The box's
maxlength counts a line break as one character; the form posts it as two (CRLF)."""

from playwright.sync_api import expect

from intents.models import DraftNote
from tests.browser import BROWSER_MARKS, new_draft, sign_in

pytestmark = BROWSER_MARKS


def test_a_note_of_many_lines_that_fits_the_box_is_saved(page, shop):
    draft = new_draft(shop)
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    # 40 lines of 49 letters: 1,999 characters with the line breaks between them, as the box
    # counts them (its maxlength lets every one in), 2,038 as posted.
    text = "\n".join(["x" * 49] * 40)
    box = page.locator("#note-text")
    box.fill(text)
    assert box.evaluate("b => [b.value.length, b.validity.valid]") == [1_999, True]
    page.click(".note-form button[type=submit]")
    expect(page.locator("[data-note-id]")).to_have_count(1)
    assert DraftNote.objects.get().text == text
