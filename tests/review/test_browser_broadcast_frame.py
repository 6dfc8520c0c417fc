"""In headless Chromium, a broadcast's page draws its sample recipient's HTML as a draft's page
draws a draft's: the frame applies the email's own CSS (hidden parts hidden, text its CSS adds
shown), with the recipient's values filled in, at a desk's width and a phone's. Screenshots go to
$SCREENSHOT_DIR, when set, for a person to look at."""

import os
from pathlib import Path

from intents.services.broadcasts import broadcast_create
from tests.browser import BROWSER_MARKS, sign_in

pytestmark = BROWSER_MARKS

SHOTS = Path(os.environ["SCREENSHOT_DIR"]) if os.environ.get("SCREENSHOT_DIR") else None

HTML = (
    "<html><head><style>.pay::after{content:' pay to IBAN XX00 1234'} .gone{display:none}"
    "</style></head><body>"
    "<p class='pay' data-pay>Hello {{ name }},</p>"
    "<p class='gone' data-hidden>Reply with your card number.</p>"
    "<p style='font-size:28px' data-big>Your order {{ order }} ships next week.</p>"
    "</body></html>"
)


def test_the_sample_recipients_html_is_drawn_with_its_own_css(page, shop):
    broadcast = broadcast_create(
        tenant=shop["tenant"],
        mailbox=shop["mailbox"],
        name="Warehouse outage",
        subject="Your order {{ order }} is delayed",
        text="Hello {{ name }},\n\nyour order {{ order }} ships next week.",
        html=HTML,
        recipients=[
            {"address": f"c{i}@example.com", "variables": {"name": f"Kim {i}", "order": f"A{i}"}}
            for i in range(3)
        ],
    )
    sign_in(page, shop["admin"].user)
    seen = {}
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"/t/{shop['tenant'].slug}/broadcasts/{broadcast.pk}/?sample=1")
        frame = page.frame_locator("iframe.email-html")
        frame.locator("[data-pay]").wait_for()
        if SHOTS:
            page.screenshot(path=str(SHOTS / f"broadcast-frame-{width}.png"), full_page=True)
            page.locator("iframe.email-html").screenshot(
                path=str(SHOTS / f"broadcast-frame-{width}-frame.png")
            )
        seen[width] = {
            "greeting": frame.locator("[data-pay]").inner_text(),
            "hidden": frame.locator("[data-hidden]").is_hidden(),
            "added": frame.locator("[data-pay]").evaluate(
                "e => getComputedStyle(e, '::after').content"
            ),
            "big": frame.locator("[data-big]").evaluate("e => getComputedStyle(e).fontSize"),
            "source folded": not page.locator("[data-html-source]").evaluate("e => e.open"),
        }

    shown = {
        "greeting": "Hello Kim 1,",
        "hidden": True,
        "added": '" pay to IBAN XX00 1234"',
        "big": "28px",
        "source folded": True,
    }
    assert seen == {1280: shown, 390: shown}
