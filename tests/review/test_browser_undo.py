"""Undo send in headless Chromium: approve, watch the countdown, click Undo; the draft is pending
again and the sandbox received nothing, with a real worker polling through the whole window."""

import re
import time

from intents.models import Draft, SendIntent
from tenants.models import Tenant
from tests.browser import BROWSER_MARKS, new_draft, sign_in
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
