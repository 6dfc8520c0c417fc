"""Hostile HTML from a draft and from inbound mail, opened in a real browser: nothing executes,
nothing is fetched, no htmx attribute of theirs is acted on."""

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
