"""In headless Chromium, the draft page shows the message as the customer's mail client will: the
HTML body with its own CSS applied (hidden parts hidden, text its CSS adds shown), and a text
body's leading blank lines. Screenshots go to /tmp/probe_c/ for a person to look at."""

from pathlib import Path

from tests.browser import BROWSER_MARKS, new_draft, sign_in

pytestmark = BROWSER_MARKS

SHOTS = Path("/tmp/probe_c")

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
    SHOTS.mkdir(exist_ok=True)
    page.locator("iframe.email-html").screenshot(path=str(SHOTS / "email-html.png"))

    assert frame.locator("[data-hidden-inline]").is_hidden()
    assert frame.locator("[data-hidden-class]").is_hidden()
    added = frame.locator("[data-pay]").evaluate("e => getComputedStyle(e, '::after').content")
    assert added == '" pay to IBAN XX00 1234"'
    assert frame.locator("[data-big]").evaluate("e => getComputedStyle(e).fontSize") == "28px"
    assert page.locator("pre.body-text").inner_text() == TEXT
