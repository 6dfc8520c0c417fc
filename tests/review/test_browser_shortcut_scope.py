"""The review shortcuts act on a draft's page only: a key the shortcut list names for a draft
does nothing on a page that shows something else."""

from intents.models import Broadcast, IntentEvent
from intents.services.broadcasts import broadcast_create
from tests.browser import BROWSER_MARKS, sign_in

pytestmark = BROWSER_MARKS


def test_the_approve_keys_on_a_broadcasts_page_approve_nothing(page, shop):
    broadcast = broadcast_create(
        tenant=shop["tenant"],
        mailbox=shop["mailbox"],
        name="Warehouse outage",
        subject="Your order {{ order }} is delayed",
        text="Hello {{ name }},\n\nyour order {{ order }} ships next week.",
        recipients=[
            {"address": f"c{i}@example.com", "variables": {"name": f"Kim {i}", "order": f"A{i}"}}
            for i in range(3)
        ],
    )
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/broadcasts/{broadcast.pk}/")
    assert page.locator("[data-approve]").is_enabled()
    # Every form the keys would submit is recorded and held back (synchronously, in the key's
    # own handler), so the assertion waits for nothing.
    page.evaluate(
        """() => {
            window.submitted = [];
            document.addEventListener("submit", (event) => {
                window.submitted.push(event.target.getAttribute("action"));
                event.preventDefault();
            }, true);
        }"""
    )
    # "a" and "n" approve on a draft's page, as the shortcut list says.
    page.keyboard.press("a")
    page.keyboard.press("n")
    assert page.evaluate("() => window.submitted") == []
    assert Broadcast.objects.get(pk=broadcast.pk).state == "pending_review"
    assert not IntentEvent.objects.filter(action="broadcast.approved").exists()
