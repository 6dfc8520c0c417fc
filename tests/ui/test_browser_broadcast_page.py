"""A broadcast's page in a browser: the progress card shows every count it holds, and axe finds
nothing critical or serious on it."""

from axe_playwright_python.sync_playwright import Axe

from intents.models import Suppression
from intents.sending.claim import intent_claim
from intents.sending.fanout import broadcast_run
from intents.sending.precheck import intent_begin_attempts
from intents.services.broadcasts import broadcast_approve, broadcast_create
from tests.browser import BROWSER_MARKS, sign_in
from tests.ui.test_browser_accessibility import _blocking

pytestmark = BROWSER_MARKS


def _sending(shop):
    """A broadcast of three, one send blocked at its pre-call check, two on their way."""
    tenant, admin = shop["tenant"], shop["admin"].user
    broadcast = broadcast_create(
        tenant=tenant,
        mailbox=shop["mailbox"],
        subject="Order {{ order }}",
        text="Hello {{ name }}",
        recipients=[
            {"address": f"customer{i}@example.com", "variables": {"name": "Ana", "order": i}}
            for i in range(3)
        ],
    )
    broadcast_approve(
        tenant=tenant, broadcast_id=broadcast.pk, content_hash=broadcast.content_hash, actor=admin
    )
    broadcast_run(broadcast.pk)
    Suppression.objects.create(
        tenant=tenant, address="customer0@example.com", reason=Suppression.Reason.MANUAL
    )
    intent_begin_attempts(intent_claim(worker="t", limit=1))
    return broadcast


def test_every_count_of_the_progress_card_is_shown_inside_it(page, shop):
    """Found in a screenshot: the card's labels took their whole length (max-content), and with
    "Not sent yet (queued, sending or awaiting an answer)" every value of the list was pushed
    out of the card and clipped, the card reading labels with no numbers."""
    broadcast = _sending(shop)
    sign_in(page, shop["admin"].user)

    page.goto(f"/t/{shop['tenant'].slug}/broadcasts/{broadcast.pk}/")

    card = page.locator("[data-progress]").bounding_box()
    shown = {}
    for value in page.locator("[data-progress] dd[data-count]").all():
        box = value.bounding_box()
        assert box["x"] >= card["x"] and box["x"] + 8 <= card["x"] + card["width"], box
        shown[value.get_attribute("data-count")] = value.inner_text()
    assert shown == {
        "accepted": "0 / 3",
        "delivered": "0",
        "bounced": "0",
        "complained": "0",
        "unsent": "2",
        "not_sent": "1",
    }
    assert _blocking(Axe(), page) == []
