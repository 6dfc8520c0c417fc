"""In headless Chromium: an HTML body's own fonts never draw what the reviewer reads. A font the
email embeds (an @font-face with a data: URL) can draw a "1" as a "6": the reviewer would read
one IBAN, and a customer whose mail client drops the font (Gmail does) another. What is approved
is the characters, so the frames that show the body (the draft page's, the editor's preview) set
them in the page's own fonts, and the draft page says that the message embeds fonts.
Screenshots go to $SCREENSHOT_DIR, when set, for a person to look at."""

import os
from pathlib import Path

from tests.browser import BROWSER_MARKS, new_draft, sign_in
from tests.fonts import trojan_font_face

pytestmark = BROWSER_MARKS

SHOTS = Path(os.environ["SCREENSHOT_DIR"]) if os.environ.get("SCREENSHOT_DIR") else None

# The IBAN set in the embedded font (its "1" drawn as a "6") and, beside it, the same characters
# in the font the first one falls back to: the same width when the embedded font is not applied
# (each on one line: the editor's preview applies no CSS of the email at all).
HTML = (
    f"<html><head><style>{trojan_font_face()}"
    ".iban{font:32px Trojan,serif} .plain{font:32px serif}</style></head><body>"
    "<p>Please pay to IBAN <span class='iban' data-iban><nobr>DE11 1001 1001</nobr></span></p>"
    "<p>The same IBAN in a system font: <span class='plain' data-plain><nobr>DE11 1001 1001</nobr></span></p>"
    "</body></html>"
)

# The frame's document: its fonts once every load it started has settled, and the two widths.
MEASURE = """e => e.ownerDocument.fonts.ready.then(() => ({
    loaded: [...e.ownerDocument.fonts].filter(f => f.status === "loaded").length,
    iban: e.ownerDocument.querySelector("[data-iban]").getBoundingClientRect().width,
    plain: e.ownerDocument.querySelector("[data-plain]").getBoundingClientRect().width,
}))"""


def _shots(page, name: str) -> None:
    """The page at 1280 px, and the card with the frame at 390 px (a full-page capture at that
    width left the frame unpainted)."""
    if not SHOTS:
        return
    page.screenshot(path=str(SHOTS / f"{name}-1280.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    card = page.locator("section.card", has=page.locator("iframe.email-html"))
    card.screenshot(path=str(SHOTS / f"{name}-390.png"))
    page.set_viewport_size({"width": 1280, "height": 900})


def test_the_draft_page_shows_the_true_characters_and_says_the_message_embeds_fonts(page, shop):
    draft = new_draft(shop, html=HTML)
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    frame = page.frame_locator("iframe.email-html")
    frame.locator("[data-iban]").wait_for()

    drawn = frame.locator("body").evaluate(MEASURE)
    _shots(page, "embedded-font-draft")

    assert drawn["loaded"] == 0
    assert drawn["iban"] == drawn["plain"]
    warning = page.locator("[data-body-warning=embedded_fonts]")
    assert warning.is_visible()
    assert "font" in warning.inner_text()


def test_the_editors_preview_shows_the_true_characters_before_and_after_typing(page, shop):
    draft = new_draft(shop, html=HTML)
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/edit/")
    frame = page.frame_locator("[data-html-preview]")
    frame.locator("[data-iban]").wait_for()
    first = frame.locator("body").evaluate(MEASURE)

    page.fill("textarea[name=html]", HTML.replace("DE11", "DE12"))
    frame.locator("[data-iban]:has-text('DE12')").wait_for()
    typed = frame.locator("body").evaluate(MEASURE)
    _shots(page, "embedded-font-edit")

    assert first["loaded"] == typed["loaded"] == 0
    assert first["iban"] == first["plain"]
    assert typed["iban"] == typed["plain"]


def test_a_stylesheet_from_elsewhere_is_not_fetched_and_the_page_says_so(page, shop):
    """A <link> to a stylesheet and an @import: the frame opens no connection for either (a mail
    client that does applies whatever that address serves, even after the approval), and the
    page says so."""
    from tests.review.test_browser_hostile import _Listener

    listener = _Listener()
    try:
        url = f"http://127.0.0.1:{listener.port}"
        html = (
            f'<html><head><link rel="stylesheet" href="{url}/a.css">'
            f"<style>@import url({url}/b.css); p{{color:#333}}</style></head>"
            "<body><p data-text>Your refund is on its way.</p></body></html>"
        )
        draft = new_draft(shop, html=html)
        sign_in(page, shop["admin"].user)
        page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
        page.frame_locator("iframe.email-html").locator("[data-text]").wait_for()
        page.wait_for_timeout(1000)
        _shots(page, "remote-styles-draft")
    finally:
        listener.close()

    assert listener.connections == 0
    assert page.locator("[data-body-warning=remote_styles]").is_visible()
    assert page.locator("[data-body-warning=embedded_fonts]").count() == 0
