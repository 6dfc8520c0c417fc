"""Presence in headless Chromium with two signed-in reviewers at once (two browser contexts):
both open the same draft's editor; the second is warned, and the first sees the second."""

from tests.browser import BROWSER_MARKS, new_draft, sign_in

pytestmark = BROWSER_MARKS


def test_two_reviewers_open_the_editor_the_second_is_warned_the_first_sees_them(
    chromium, live_server, shop, member_of
):
    ben = member_of(shop["tenant"], "approver")
    draft = new_draft(shop, subject="Two reviewers")
    url = f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/edit/"
    contexts = [
        chromium.new_context(viewport={"width": 1280, "height": 900}, base_url=live_server.url)
        for _ in range(2)
    ]
    try:
        ana_page, ben_page = (c.new_page() for c in contexts)
        for tab in (ana_page, ben_page):
            tab.set_default_timeout(15_000)
        sign_in(ana_page, shop["admin"].user)
        sign_in(ben_page, ben.user)
        # Ana's clock is the test's: her next heartbeat comes when the test moves it on, not
        # after waiting out the page's 6 s.
        ana_page.clock.install()
        ana_page.goto(url)
        assert ana_page.locator("[data-editing-warning]").count() == 0
        # Ana's editor has sent its first heartbeat (on load) before Ben opens his.
        ana_page.wait_for_load_state("networkidle")
        ben_page.goto(url)
        warning = ben_page.locator("[data-editing-warning]")
        assert warning.count() == 1
        assert shop["admin"].user.display_name in warning.inner_text()
        assert "your changes may conflict" in warning.inner_text()
        # At her next heartbeat, Ana's page shows Ben, without a reload.
        ana_page.clock.fast_forward(6_000)
        ana_page.wait_for_selector(f'[data-presence] [data-present="{ben.user.email}"]')
        assert "editing" in ana_page.locator(f'[data-present="{ben.user.email}"]').inner_text()
        # The queue shows the marker to a third look (Ben's tab), naming Ana.
        ben_page.goto(f"/t/{shop['tenant'].slug}/")
        marker = ben_page.locator("[data-present-row]")
        assert shop["admin"].user.display_name in marker.inner_text()
    finally:
        for c in contexts:
            c.close()
