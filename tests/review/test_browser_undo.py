"""Undo send in headless Chromium: approve, watch the countdown, click Undo; the draft is pending
again and the sandbox received nothing, with a real worker polling through the whole window."""

import re
import time

from intents import services
from intents.models import Draft, SendIntent
from intents.sending.precheck import HOLD_REASON
from tenants.models import Tenant
from tests.browser import BROWSER_MARKS, new_draft, shot, sign_in
from tests.intents.conftest import start_worker

pytestmark = BROWSER_MARKS


def test_approve_see_the_countdown_click_undo_nothing_sent(page, shop, sandbox):
    Tenant.objects.filter(pk=shop["tenant"].pk).update(send_hold_seconds=8)
    draft = new_draft(shop, subject="Undo me")
    worker = start_worker(sandbox, "--seconds", "14", "--poll", "0.1", "--sweep-every", "0.5")
    try:
        sign_in(page, shop["admin"].user)
        page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
        page.click("[data-approve]")
        page.wait_for_url(re.compile(r"/outbox/\d+/$"))
        intent = SendIntent.objects.get(draft=draft)
        countdown = page.locator(".card [data-undo] [data-countdown]").first
        first = int(countdown.inner_text())
        assert 1 <= first <= 8
        page.wait_for_function(
            "n => Number(document.querySelector('.card [data-undo] [data-countdown]')"
            ".textContent) < n",
            arg=first,
        )
        page.locator(".card [data-undo-button]").first.click()
        page.wait_for_url(f"**/drafts/{draft.pk}/")
        assert page.locator(".flash .success", has_text="Undone").count() == 1
        assert page.locator("[data-approve]").count() == 1  # pending: it can be approved anew
        # Past the end of the window, the worker still polling.
        time.sleep(max(0.0, (intent.hold_until - intent.approved_at).total_seconds() - first + 2))
        assert worker.poll() is None
    finally:
        worker.terminate()
        worker.communicate(timeout=30)
    intent.refresh_from_db()
    assert intent.state == "cancelled"
    assert Draft.objects.get(pk=draft.pk).status == "pending"
    assert sandbox.ledger(idempotency_key=intent.idempotency_key) == []


def test_the_countdown_of_a_send_held_inside_its_window_says_it_is_held(page, shop):
    """Found by a probe: a reply held inside its undo window (the customer wrote again after the
    approval) counted down to "Sending in 40 seconds", then "The undo window has closed; it is
    on its way": a held send goes nowhere until a person releases it."""
    Tenant.objects.filter(pk=shop["tenant"].pk).update(send_hold_seconds=40)
    draft = new_draft(shop, subject="Hold me")
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    page.click("[data-approve]")
    page.wait_for_url(re.compile(r"/outbox/\d+/$"))
    intent = SendIntent.objects.get(draft=draft)
    services.intent_hold(tenant=shop["tenant"], intent_id=intent.pk, reason=HOLD_REASON)
    page.clock.install()  # the countdown's timers run when told, not in real seconds
    held = (
        "Held: customer wrote again in this thread after the draft was written; re-confirm. "
        "It will not be sent until a person releases it."
    )
    pages = {
        "send": (f"/t/{shop['tenant'].slug}/outbox/{intent.pk}/", ".card [data-undo]"),
        "draft": (f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/", "[data-undo-box] [data-undo]"),
        "outbox": (f"/t/{shop['tenant'].slug}/outbox/", "[data-undo]"),
    }
    told = {}
    for name, (url, selector) in pages.items():
        page.goto(url)
        form = page.locator(selector).first
        opened = form.locator("[data-undo-open]").inner_text()
        shot(page, f"held-undo-open-{name}")
        page.clock.run_for(41_000)
        form.locator("[data-undo-closed]").wait_for(state="visible")
        shot(page, f"held-undo-closed-{name}")
        told[name] = (opened, form.locator("[data-undo-closed]").inner_text())

    for opened, closed in told.values():
        assert opened.startswith(held) and "Sending in" not in opened
        assert closed == f"The undo window has closed. {held}"
