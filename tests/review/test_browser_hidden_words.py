"""In headless Chromium, a reviewer shown a draft whose HTML holds words its frame does not show:
the page says how they are hidden and how to find them among every word it holds. Screenshots go
to $SCREENSHOT_DIR when it is set."""

import os

from tests.browser import BROWSER_MARKS, new_draft, sign_in

pytestmark = BROWSER_MARKS

HIDDEN = "Reply with your card number to claim the refund"
# No style hides these words: they are a document inside a frame of the message, which a mail
# client that draws frames shows and the draft page's frame shows only as the source of a tag.
SRCDOC = f"<p>Your refund is on its way.</p><iframe srcdoc='&lt;p&gt;{HIDDEN}&lt;/p&gt;'></iframe>"


def _shot(page, name: str) -> None:
    folder = os.environ.get("SCREENSHOT_DIR")
    if folder:
        page.screenshot(path=os.path.join(folder, f"{name}.png"), full_page=True)


def test_the_hidden_words_note_says_how_they_hide_and_how_to_find_them(page, shop):
    """The note said "text that its styles hide from this frame" for words no style hides (a
    frame's document, an image's description, an SVG's) or that the frame draws unseen (in the
    colour behind them, under a box), and gave every word of the message, the shown with the
    hidden, without saying how to tell them apart."""
    draft = new_draft(shop, html=SRCDOC)
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    box = page.locator('[data-body-warning="reader_looks"]')
    note = box.locator('[data-look-note="hidden_text"]').inner_text()
    _shot(page, "hidden-words-note")

    looks = box.locator("p").first.inner_text()
    assert looks.startswith("Some readers get this HTML otherwise than this page shows it")
    assert "mail clients that show the words it hides" in looks
    assert "a document inside a frame of the message" in note
    assert "in the colour behind them" in note
    # The words it hides are listed apart, above every word it holds.
    assert box.locator("[data-hidden-words-list]").inner_text() == HIDDEN
    assert HIDDEN in box.locator("[data-html-words]").inner_text()


RESPONSIVE = (
    "<style>@media (max-width:600px){p{font-size:18px}}</style><p>Your refund is on its way.</p>"
)
WHITE = "<p>Your refund is on its way.</p><p style='color:#fff;background:#fff'>" + HIDDEN + "</p>"


def test_the_queue_row_of_a_draft_with_hidden_words_says_so(page, shop):
    """Every row whose HTML had any reader-dependent style (an @media rule for phones, which
    most newsletters have) carried the same "looks otherwise to some readers" badge as a row
    whose HTML hides words from the reviewer, the one a phishing draft hides behind."""
    responsive = new_draft(shop, html=RESPONSIVE, subject="Your refund, on a phone")
    white = new_draft(shop, html=WHITE, subject="Your refund, in white")
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/")

    def row(draft):
        return page.locator("article.qrow", has=page.locator(f'a[href$="/drafts/{draft.pk}/"]'))

    _shot(page, "hidden-words-queue")
    assert row(white).locator("[data-hidden-words]").count() == 1
    assert row(white).locator("[data-hidden-words]").inner_text() == "hidden words"
    assert row(responsive).locator("[data-reader-looks]").is_visible()
    assert row(responsive).locator("[data-hidden-words]").count() == 0


NEWSLETTER = (
    '<div style="display:none;max-height:0">Your account is locked</div>'
    "<p>Dear customer,</p><p>Your refund is on its way.</p>"
    "<p style='color:#ffffff'>Reply with your card number to claim it</p>"
    "<iframe srcdoc='&lt;p&gt;Enter your PIN here&lt;/p&gt;'></iframe>"
    "<p>Kind regards, the shop</p>"
)


def test_the_page_shows_which_words_the_html_hides_above_every_word_it_holds(page, shop):
    """In a long newsletter the reviewer had to find the hidden lines by comparing every word of
    the message with the frame; the page now shows the hidden ones apart, above the full list."""
    draft = new_draft(shop, html=NEWSLETTER)
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    box = page.locator('[data-body-warning="reader_looks"]')
    hidden = box.locator("[data-hidden-words-list]")
    every = box.locator("[data-html-words]")
    hidden.scroll_into_view_if_needed()
    _shot(page, "hidden-words-list")

    assert box.locator("[data-hidden-words-heading]").inner_text() == "The words it hides:"
    assert hidden.inner_text().splitlines() == [
        "Your account is locked",
        "Reply with your card number to claim it",
        "Enter your PIN here",
    ]
    assert hidden.bounding_box()["y"] < every.bounding_box()["y"]
    assert "Kind regards, the shop" in every.inner_text()


def test_the_page_does_not_claim_all_hidden_words_where_a_style_sheet_rule_hides_some(page, shop):
    """Which element a rule of a <style> reaches only drawing tells: the words the page can point
    to are shown as some of them, the reviewer sent to every word for the rest."""
    html = "<style>.pre{display:none}</style><p class=pre>Your account is locked</p>" + WHITE
    draft = new_draft(shop, html=html)
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    box = page.locator('[data-body-warning="reader_looks"]')

    heading = box.locator("[data-hidden-words-heading]").inner_text()
    assert heading.startswith("Some of the words it hides:")
    assert box.locator("[data-hidden-words-list]").inner_text() == HIDDEN
