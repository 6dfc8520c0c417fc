"""In Chromium: the navigation's counts move without a reload, bulk approval shows its progress
and keeps the filters, and htmx actions show they are busy."""

import re

from playwright.sync_api import expect

from intents import services
from intents.models import Draft, SendIntent
from tests.browser import BROWSER_MARKS, new_draft, sign_in

pytestmark = BROWSER_MARKS


def test_nav_counts_move_without_a_reload(page, shop):
    new_draft(shop, subject="First")
    sign_in(page, shop["admin"].user)
    count = page.locator("#nav-count-queue")
    expect(count).to_have_text("1")
    new_draft(shop, subject="Second")
    # What the 15 s timer does, now: the tab became visible again.
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    expect(count).to_have_text("2")


def test_bulk_approve_shows_progress_and_each_rows_result(page, shop):
    drafts = [new_draft(shop, subject=f"Bulk {n}") for n in range(3)]
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/?q=Bulk&sort=newest")
    page.check("[data-select-all]")
    # Changed by the agent after the page was shown: its row must be refused.
    services.draft_add_version(
        tenant=shop["tenant"],
        draft_id=drafts[0].pk,
        base_version=1,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Bulk 0, revised",
        text="Revised.",
        html="",
        actor_user=shop["admin"].user,
    )
    page.click("[data-bulk-approve]")
    status = page.locator("[data-bulk-progress]")
    expect(status).to_contain_text("Done: 2 of 3 approved, 1 refused")
    assert page.locator("[data-bulk-result=approved]").count() == 2
    assert page.locator("[data-bulk-result=refused]").count() == 1
    assert SendIntent.objects.filter(draft__in=drafts).count() == 2
    assert Draft.objects.get(pk=drafts[0].pk).status == "pending"
    refresh = page.locator("[data-bulk-refresh]")
    assert refresh.is_visible()
    refresh.click()
    page.wait_for_url(re.compile(r"\?q=Bulk&sort=newest$"))


def test_an_htmx_action_is_busy_while_it_runs(page, shop):
    draft = new_draft(shop, subject="Busy")
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    # Record what the decision card looked like while its request ran.
    page.evaluate(
        """() => {
          window.busySeen = [];
          const record = () => {
            const card = document.getElementById("decision");
            const button = document.querySelector("[data-approve]");
            if (card && card.getAttribute("aria-busy") === "true")
              window.busySeen.push(button ? button.disabled : null);
          };
          new MutationObserver(record).observe(document.body, {attributes: true, subtree: true});
        }"""
    )
    # Changed meanwhile: the refusal is swapped in and the page stays, with what it recorded.
    services.draft_add_version(
        tenant=shop["tenant"],
        draft_id=draft.pk,
        base_version=1,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Busy, revised",
        text="Revised.",
        html="",
        actor_user=shop["admin"].user,
    )
    page.click("[data-approve]")
    expect(page.locator("[data-refusal=stale_version]")).to_be_visible()
    assert page.evaluate("window.busySeen.length > 0 && window.busySeen.every((d) => d === true)")
    assert page.locator("#decision[aria-busy]").count() == 0
    assert not SendIntent.objects.filter(draft=draft).exists()
