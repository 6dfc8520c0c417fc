"""In headless Chromium, the draft page shows the message as the customer's mail client will: the
HTML body with its own CSS applied (hidden parts hidden, text its CSS adds shown), and a text
body's leading blank lines. Screenshots go to $SCREENSHOT_DIR, when set, for a person to look at."""

import os
from pathlib import Path

from tests.browser import BROWSER_MARKS, new_draft, sign_in

pytestmark = BROWSER_MARKS

SHOTS = Path(os.environ["SCREENSHOT_DIR"]) if os.environ.get("SCREENSHOT_DIR") else None

# What a mail client shows of this: "Hello, pay to IBAN XX00 1234" and "Kind regards"; the
# "not binding" line is hidden, the greeting is 28 px.
HTML = (
    "<html><head><style>.pay::after{content:' pay to IBAN XX00 1234'} .gone{display:none}"
    "</style></head><body>"
    "<p class='pay' data-pay>Hello,</p>"
    "<p style='display:none' data-hidden-inline>This offer is not binding.</p>"
    "<p class='gone' data-hidden-class>Ignore the above.</p>"
    "<p style='font-size:28px' data-big>Kind regards</p>"
    "</body></html>"
)
TEXT = "\n\nHello,\n\n  an indented line and trailing spaces   \nKind regards\n"


def test_the_html_body_is_shown_with_its_own_css_and_the_text_with_its_blank_lines(page, shop):
    draft = new_draft(shop, text=TEXT, html=HTML)
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    frame = page.frame_locator("iframe.email-html")
    frame.locator("[data-pay]").wait_for()
    if SHOTS:
        page.locator("iframe.email-html").screenshot(path=str(SHOTS / "email-html.png"))

    assert frame.locator("[data-hidden-inline]").is_hidden()
    assert frame.locator("[data-hidden-class]").is_hidden()
    added = frame.locator("[data-pay]").evaluate("e => getComputedStyle(e, '::after').content")
    assert added == '" pay to IBAN XX00 1234"'
    assert frame.locator("[data-big]").evaluate("e => getComputedStyle(e).fontSize") == "28px"
    assert page.locator("pre.body-text").inner_text() == TEXT


def _as_shown(frame) -> dict:
    """What a reader of the frame sees of HTML: which parts are hidden, the text its CSS adds."""
    frame.locator("[data-pay]").wait_for()
    return {
        "inline hidden": frame.locator("[data-hidden-inline]").is_hidden(),
        "class hidden": frame.locator("[data-hidden-class]").is_hidden(),
        "added": frame.locator("[data-pay]").evaluate(
            "e => getComputedStyle(e, '::after').content"
        ),
        "big": frame.locator("[data-big]").evaluate("e => getComputedStyle(e).fontSize"),
    }


def test_the_editors_preview_shows_the_html_as_the_draft_page_does(page, shop):
    """The editor's preview was the HTML written into its frame's ``srcdoc``, under the staff
    page's policy, which blocks every style attribute and <style> element: the reviewer who
    edited saw the hidden lines and not the added IBAN that the draft page (and the customer)
    shows. It shows what the draft page's frame shows, on opening and as the person types."""
    draft = new_draft(shop, text=TEXT, html=HTML)
    sign_in(page, shop["admin"].user)
    slug = shop["tenant"].slug
    page.goto(f"/t/{slug}/drafts/{draft.pk}/")
    on_draft_page = _as_shown(page.frame_locator("iframe.email-html"))
    page.goto(f"/t/{slug}/drafts/{draft.pk}/edit/")
    opened = _as_shown(page.frame_locator("[data-html-preview]"))
    history = page.evaluate("history.length")
    posts = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    field = page.locator("textarea[name=html]")
    field.fill(HTML.replace("Kind regards", "Warm regards"))
    field.press("End")
    field.press_sequentially("<p>PS</p>", delay=20)
    page.frame_locator("[data-html-preview]").get_by_text("PS").wait_for()
    typed = _as_shown(page.frame_locator("[data-html-preview]"))
    for width in (1280, 390) if SHOTS else ():
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(SHOTS / f"edit-preview-{width}.png"), full_page=True)

    assert on_draft_page == {
        "inline hidden": True,
        "class hidden": True,
        "added": '" pay to IBAN XX00 1234"',
        "big": "28px",
    }
    assert opened == on_draft_page
    assert typed == on_draft_page
    # A post after each pause in the typing, not one a keystroke (ten keys here): the fill and
    # the keys after it are two bursts, one post or two (on a loaded machine the 300 ms pause
    # can fall between them, seen in CI); the frames it loaded into added nothing to the tab's
    # history (Back leaves the editor), and one preview is left.
    previews = [u for u in posts if u.endswith("/html/preview/")]
    assert 1 <= len(previews) <= 2, previews
    assert set(previews) == {f"{page.url.split('/t/')[0]}/t/{slug}/drafts/{draft.pk}/html/preview/"}
    assert page.evaluate("history.length") == history
    assert page.locator("iframe.email-html").count() == 1


def test_the_preview_after_a_refused_save_shows_the_html_typed(page, shop):
    """A save refused (here: no recipient) brings the page back with the person's HTML, which
    is in no version: the preview shows it as the draft page's frame would."""
    draft = new_draft(shop, text=TEXT, html="<p>Old</p>")
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/edit/")
    page.fill("textarea[name=html]", HTML)
    page.fill("input[name=to]", "")
    page.evaluate("document.querySelector('.edit-form').noValidate = true")
    page.click("button.primary")
    page.locator(".edit-form .error").first.wait_for()

    assert _as_shown(page.frame_locator("[data-html-preview]")) == {
        "inline hidden": True,
        "class hidden": True,
        "added": '" pay to IBAN XX00 1234"',
        "big": "28px",
    }


# Hidden above 600 px (the reviewer's window), shown on a phone.
PHONE_ONLY = (
    "<style>.m{display:none} @media (max-width: 600px){.m{display:block}}</style>"
    "<p data-everyone>Your refund is on its way.</p>"
    "<p class=m data-phone-only>Reply with your card number to speed it up.</p>"
)


def test_the_phone_width_view_shows_what_only_a_phone_reader_sees(page, shop):
    """In a 1280 px window the frame is some 700 px wide and a sentence for screens up to 600 px
    is hidden; the reviewer approved it unseen. The page warns and shows the frame at 390 px,
    where the email's own media query shows it."""
    draft = new_draft(shop, text=TEXT, html=PHONE_ONLY)
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    frame = page.frame_locator("iframe.email-html")
    frame.locator("[data-everyone]").wait_for()
    in_window = frame.locator("[data-phone-only]").is_visible()
    window_width = page.locator("iframe.email-html").bounding_box()["width"]
    if SHOTS:
        page.locator("#message-html").screenshot(path=str(SHOTS / "email-html-window.png"))

    page.locator('[data-body-warning="reader_looks"] [data-look="phone"]').click()
    page.locator("iframe.email-html.phone-width").wait_for()
    frame.locator("[data-phone-only]").wait_for()
    phone_width = page.locator("iframe.email-html").bounding_box()["width"]
    if SHOTS:
        page.locator("#message-html").screenshot(path=str(SHOTS / "email-html-phone.png"))
        page.screenshot(path=str(SHOTS / "email-html-phone-page.png"), full_page=True)

    assert window_width > 600
    assert not in_window
    assert phone_width == 390
    assert frame.locator("[data-phone-only]").is_visible()
    assert page.locator("[data-look-shown]").is_visible()
