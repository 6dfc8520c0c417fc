"""Hostile HTML from a draft and from inbound mail, opened in a real browser: nothing executes,
nothing is fetched, no htmx attribute of theirs is acted on; a customer's text stays inside its
own box, drawing nothing over the rest of the page."""

import socket
import threading
import time

from django.utils import timezone

from tests.browser import BROWSER_MARKS, new_draft, sign_in
from webhooks.models import InboundMessage

pytestmark = BROWSER_MARKS

HOSTILE_HTML = (
    "<p>Hello</p>"
    "<script>window.top.__pwned = 'script'; alert(1)</script>"
    "<img src=x onerror=\"window.top.__pwned='onerror'; alert(2)\">"
    "<svg onload=\"window.top.__pwned='svg'\"></svg>"
    "<a href=\"javascript:window.top.__pwned='href'\" id=evil>click me</a>"
    '<div hx-get="/hostile-htmx-probe/" hx-trigger="load">htmx</div>'
    '<iframe src="javascript:alert(3)"></iframe>'
    # Another origin, on a port Chromium does not refuse by itself (port 9 is on its unsafe-port
    # list). Chromium may still refuse a loopback request from a sandboxed srcdoc frame on its
    # own, so the policy that keeps remote images out is pinned in test_access_walk.py.
    '<img src="http://127.0.0.1:49151/tracking-pixel.png">'
)
HOSTILE_TEXT = (
    "<script>window.__pwned='text'</script><b hx-get='/hostile-htmx-probe/' hx-trigger='load'>x</b>"
)


def test_hostile_draft_and_inbound_html_stay_inert(page, shop):
    InboundMessage.objects.create(
        tenant=shop["tenant"],
        mailbox=shop["mailbox"],
        thread_id="thread-hostile",
        message_id="<hostile@example.com>",
        sender="attacker@example.com",
        subject="<img src=x onerror=alert(4)><script>window.__pwned='subject'</script>",
        preview=HOSTILE_TEXT,
        received_at=timezone.now(),
    )
    # A reply, so the page shows the thread; its subject is "Re: " and the customer's.
    draft = new_draft(
        shop,
        subject=None,
        text=HOSTILE_TEXT,
        html=HOSTILE_HTML,
        in_reply_to="<hostile@example.com>",
    )
    dialogs, requests, blocked_by_csp = [], [], set()
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.on("request", lambda request: requests.append(request.url))
    # Chromium sometimes announces a request (its preload scanner) and then blocks it by the
    # Content-Security-Policy before anything leaves the browser: that is "nothing fetched".
    # An attempt that did leave would fail otherwise (nothing listens there) or get a response.
    page.on(
        "requestfailed",
        lambda request: request.failure == "csp" and blocked_by_csp.add(request.url),
    )
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(500)
    assert page.evaluate("window.__pwned === undefined")
    assert dialogs == []
    hostile = [url for url in requests if "hostile-htmx-probe" in url or "tracking-pixel" in url]
    assert [url for url in hostile if url not in blocked_by_csp] == []
    # The text body and the inbound preview are shown as text, markup visible, not interpreted.
    assert page.locator("text=<script>window.__pwned='text'</script>").count() >= 1


def _customer_writes(sandbox, shop, *, sender: str, subject: str, text: str, **extra) -> dict:
    """Mail into the sandbox inbox; its signed webhook reaches the live server, whose applier
    stores it."""
    message = sandbox.inbound(
        shop["mailbox"].inbox_id, from_=sender, subject=subject, text=text, **extra
    )
    deadline = time.monotonic() + 15
    while not InboundMessage.objects.filter(message_id=message["message_id"]).exists():
        assert time.monotonic() < deadline, "the message never reached the receiver"
        time.sleep(0.05)
    return message


def _reply(shop, message: dict, to: str):
    return new_draft(
        shop,
        subject=None,
        to=[to],
        thread_id=message["thread_id"],
        in_reply_to=message["message_id"],
    )


# Words joined by no-break spaces and letters that are neither (U+2800 BRAILLE PATTERN BLANK):
# one word for the line breaker, that ran on across the next column.
SPOOF = "\u2800" * 90 + "\u00a0".join(["Checked:", "safe", "to", "approve"])
# Sixty combining marks on each letter: a column of ink far above and below its line.
ZALGO = "".join(letter + "\u0301" * 30 + "\u0317" * 30 for letter in "Refund status")


def test_a_customers_long_words_wrap_inside_their_box_and_never_reach_the_decision(
    page, shop, sandbox
):
    first = _customer_writes(
        sandbox, shop, sender="Ana <ana@customer.test>", subject="Order 1182", text="Hello"
    )
    _customer_writes(
        sandbox,
        shop,
        sender="A" * 200 + SPOOF + " <ana@customer.test>",
        subject="B" * 400 + SPOOF,
        text="C" * 300 + SPOOF,
        in_reply_to=first["message_id"],
    )
    draft = _reply(shop, first, "ana@customer.test")
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")

    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    outside = page.evaluate(
        """() => [...document.querySelectorAll('[data-customer-content], bdi')].filter(el => {
            const box = el.closest('.card, .warn-box, .notice, .error-box') || document.body;
            return el.getBoundingClientRect().right > box.getBoundingClientRect().right + 1;
        }).map(el => el.textContent.slice(0, 40))"""
    )
    assert outside == []
    column = page.locator("aside.draft-side").bounding_box()
    spoof = [found.bounding_box() for found in page.get_by_text("safe\u00a0to\u00a0approve").all()]
    assert len(spoof) >= 2
    assert [box for box in spoof if _overlap(box, column)] == []


def _overlap(a: dict, b: dict) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


def test_a_customers_stacked_accents_draw_nothing_over_the_recipients_or_the_draft_text(
    page, shop, sandbox
):
    plain = _customer_writes(
        sandbox, shop, sender="Ana <ana@customer.test>", subject="Refund status", text="Hi"
    )
    hostile = _customer_writes(
        sandbox,
        shop,
        sender="An" + "\u0301" * 80 + "a <ana@customer.test>",
        subject=ZALGO,
        text=ZALGO,
    )
    seen = {}
    sign_in(page, shop["admin"].user)
    for name, message in (("plain", plain), ("hostile", hostile)):
        draft = _reply(shop, message, "ana@customer.test")
        page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
        # The page's first requests (presence, counts) answered and drawn, fonts in: a slow
        # answer landing during a screenshot moved the card under it (a red run under load).
        page.wait_for_load_state("networkidle")
        page.evaluate("document.fonts.ready.then(() => true)")
        seen[name] = [
            page.locator(selector).screenshot(animations="disabled", caret="hide")
            for selector in (".card:has(ul.recipients)", "pre.body-text")
        ]

    assert seen["hostile"] == seen["plain"]


class _Listener:
    """A TCP port on loopback that counts the connections made to it."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopped.is_set():
            try:
                connection, _ = self.server.accept()
            except TimeoutError:
                continue
            self.connections += 1
            connection.close()

    def close(self):
        self.stopped.set()
        self.thread.join()
        self.server.close()


def test_a_frame_in_the_html_body_opens_no_connection_to_its_host(page, shop):
    """Chromium connected to an iframe's host (a DNS lookup and a TCP connection: when, and from
    which address, a reviewer opened the draft) though the frame's policy refuses to load it. A
    customer's HTML reaches a draft when the agent quotes it."""
    listener = _Listener()
    try:
        url = f"http://127.0.0.1:{listener.port}/opened"
        html = f'<p>Quoted:</p><IFRAME\nsrc="{url}"></iframe><iframe/src="{url}"></iframe>'
        draft = new_draft(shop, html=html)
        sign_in(page, shop["admin"].user)
        slug = shop["tenant"].slug

        page.goto(f"/t/{slug}/drafts/{draft.pk}/")
        page.frame_locator("iframe.email-html").get_by_text("Quoted:").wait_for()
        page.goto(f"/t/{slug}/drafts/{draft.pk}/edit/")
        page.locator("textarea[name=html]").press("End")
        page.locator("textarea[name=html]").type(" ")
        page.frame_locator("[data-html-preview]").get_by_text("Quoted:").wait_for()
        page.wait_for_timeout(1500)
    finally:
        listener.close()

    assert listener.connections == 0


def test_a_frame_of_a_frameset_in_the_html_body_opens_no_connection_to_its_host(page, shop):
    """An HTML body that is a frameset document (``<frameset><frame src=...>``): Chromium
    connected to each frame's host as it did to an iframe's, though the policy refuses to load
    it, on the draft page and in the editor's live preview."""
    listener = _Listener()
    try:
        url = f"http://127.0.0.1:{listener.port}/opened"
        html = f'<frameset><FRAME\nsrc="{url}"><frame/src="{url}"></frameset>'
        draft = new_draft(shop, html=html)
        sign_in(page, shop["admin"].user)
        slug = shop["tenant"].slug

        page.goto(f"/t/{slug}/drafts/{draft.pk}/")
        page.wait_for_load_state("networkidle")
        page.goto(f"/t/{slug}/drafts/{draft.pk}/edit/")
        page.locator("textarea[name=html]").press("End")
        page.locator("textarea[name=html]").type(" ")
        page.wait_for_timeout(1500)
    finally:
        listener.close()

    assert listener.connections == 0


def test_stacked_accents_inside_a_line_draw_nothing_over_the_lines_around_it(page, shop, sandbox):
    """Inline customer text (the quoted subject and the sender in "The customer wrote again")
    had no box to clip its ink to: a stack of marks drew over the warning's first and last lines.
    Those lines look the same with the customer's text drawn and hidden."""
    first = _customer_writes(
        sandbox, shop, sender="Ana <ana@customer.test>", subject="Order 1182", text="Hi"
    )
    _customer_writes(
        sandbox,
        shop,
        sender="An" + "\u0301" * 80 + "a <ana@customer.test>",
        subject=ZALGO,
        text="Hi",
        in_reply_to=first["message_id"],
    )
    draft = _reply(shop, first, "ana@customer.test")
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    page.wait_for_load_state("networkidle")
    around = (".warn-box.alert > strong", ".warn-box.alert")

    def lines():
        box = page.locator(around[1]).bounding_box()
        head = page.locator(around[0]).bounding_box()
        quoted = page.locator(".warn-box.alert [data-customer-content]").bounding_box()
        # Four pixels off the quoted line's box either side: its clipped edge, antialiased.
        top = {**box, "height": quoted["y"] - box["y"] - 4}
        bottom_y = quoted["y"] + quoted["height"] + 4
        bottom = {**box, "y": bottom_y, "height": box["y"] + box["height"] - bottom_y}
        assert head["y"] < quoted["y"]
        return [page.screenshot(clip=c, animations="disabled", caret="hide") for c in (top, bottom)]

    drawn = lines()
    page.evaluate(
        "document.querySelectorAll('.warn-box.alert :is([data-customer-content], bdi)')"
        ".forEach(e => { e.style.visibility = 'hidden'; })"
    )

    assert drawn == lines()
