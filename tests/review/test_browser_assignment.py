"""Two reviewers signed in at once (two browser contexts): one takes a draft, the other's open
queue shows it taken within a few seconds, without a reload."""

import re

from playwright.sync_api import expect

from intents.models import Draft
from tests.browser import BROWSER_MARKS, new_draft, sign_in

pytestmark = BROWSER_MARKS


def test_a_take_shows_in_the_other_reviewers_queue_without_reload(
    chromium, live_server, shop, member_of
):
    tenant = shop["tenant"]
    ana = member_of(tenant, "approver", user__full_name="Ana Approver").user
    ben = member_of(tenant, "approver", user__full_name="Ben Reviewer").user
    draft = new_draft(shop)
    contexts = [
        chromium.new_context(viewport={"width": 1280, "height": 900}, base_url=live_server.url)
        for _ in range(2)
    ]
    try:
        ana_page, ben_page = (c.new_page() for c in contexts)
        # Ben's clock is the test's: his queue's next poll comes when the test moves it on.
        ben_page.clock.install()
        for tab, person in ((ana_page, ana), (ben_page, ben)):
            tab.set_default_timeout(10_000)
            sign_in(tab, person)
        badge = ben_page.locator(f"#holder-{draft.pk} .badge")
        take = ben_page.locator(f"#holder-{draft.pk} [data-take]")
        expect(badge).to_have_text("unassigned")
        expect(take).to_have_count(1)
        ben_page.evaluate("window.__notReloaded = true")

        ana_page.goto(f"/t/{tenant.slug}/drafts/{draft.pk}/")
        ana_page.locator("[data-take]").click()
        expect(ana_page.locator("[data-holder-line]")).to_contain_text("You hold this draft.")
        assert Draft.objects.get(pk=draft.pk).assignee == ana

        # The queue's live part polls every 5 s and swaps the row's holder badge in place.
        ben_page.clock.fast_forward(5_000)
        expect(badge).to_have_text("held by Ana Approver")
        assert Draft.objects.get(pk=draft.pk).assignee == ana
        assert ben_page.evaluate("window.__notReloaded") is True
        assert re.search(r"/t/[\w-]+/$", ben_page.url)

        # His Take button went with the swap: a take now would be refused.
        expect(take).to_have_count(0)
    finally:
        for c in contexts:
            c.close()
