"""The parts of a page that update themselves (the queue's live notice, the navigation's counts,
the health panel, presence beats) in headless Chromium, when their polls are refused: the
membership ended, the role was taken away, the tenant suspended. The page says once, near the
top, that it stopped updating and why (the server's own words), and how to go on; the refused
polls stop instead of asking again every few seconds. A poll that fails once says nothing, a
server out of reach for a while is said softly and unsaid when it answers again, and a page
that knows it is limited (a suspended tenant's) raises no alarm."""

import os
import re
from urllib.parse import parse_qs, urlsplit

from django.contrib.sessions.models import Session

from tenants import onboarding
from tenants import services as tenant_services
from tests.browser import BROWSER_MARKS, new_draft, sign_in

pytestmark = BROWSER_MARKS

POLLS = ("/queue/changes/", "/nav/counts/", "/presence/", "/admin/")
RELOAD = "Reload the page to see where things stand."


def _shoot(page, name):
    if shots := os.environ.get("SCREENSHOT_DIR"):
        page.screenshot(path=f"{shots}/{name}.png")


def _count_announcements(page):
    """How many times the notice's words are set from now on (each would be announced)."""
    page.evaluate(
        """() => {
          window.__announced = 0;
          const region = document.getElementById('live-stopped');
          new MutationObserver(() => { window.__announced += 1; })
            .observe(region, {childList: true, characterData: true, subtree: true});
        }"""
    )


def _polls_sent(page):
    sent = []
    page.on("request", lambda r: sent.append(r.url) if any(p in r.url for p in POLLS) else None)
    return sent


def _on_the_queue(page, shop, member_of, role="approver"):
    member = member_of(shop["tenant"], role)
    new_draft(shop)
    sign_in(page, member.user)
    page.wait_for_load_state("networkidle")
    return member


def test_the_queue_says_once_that_it_stopped_updating_when_the_membership_ends(
    page, shop, member_of, tenant_b
):
    page.clock.install()  # the polls' timers run when told, not in real seconds
    member = _on_the_queue(page, shop, member_of)
    # A member of another tenant too keeps their session (tenants.services.member_deactivate).
    member_of(tenant_b, "viewer", user=member.user)
    notice = page.locator("#live-stopped")
    assert notice.is_hidden()
    _count_announcements(page)
    tenant_services.member_deactivate(
        tenant=shop["tenant"], membership_id=member.pk, actor=shop["admin"].user
    )

    page.clock.run_for(5_100)  # the queue polls every 5 s
    notice.wait_for(state="visible")

    assert notice.get_attribute("role") == "status"
    assert notice.inner_text() == (
        f"This page stopped updating. There is nothing here, or it is not yours to see. {RELOAD}"
    )
    assert notice.locator("a").get_attribute("href") == ""
    assert page.locator("#request-error").is_hidden()  # not the alarm of a refused click
    _shoot(page, "live-stopped-membership")
    # Every poll of the page stops: the queue's timer, and the counts' (tab shown again).
    sent = _polls_sent(page)
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    page.clock.run_for(31_000)
    page.wait_for_timeout(300)
    assert sent == []
    assert page.evaluate("window.__announced") == 1
    assert page.evaluate("document.querySelectorAll('[aria-busy]').length") == 0


def test_the_health_panel_says_it_no_longer_refreshes_when_the_admin_role_is_taken_away(
    page, shop, member_of
):
    admin = member_of(shop["tenant"], "admin")
    page.clock.install()
    sign_in(page, admin.user)
    page.goto(f"/t/{shop['tenant'].slug}/admin/")
    page.wait_for_load_state("networkidle")
    line = page.locator("#health [data-poll-note]")
    assert re.fullmatch(r"Refreshed \d\d:\d\d:\d\d \w+, every 30 seconds\.", line.inner_text())
    tenant_services.member_set_role(
        tenant=shop["tenant"], membership_id=admin.pk, role="approver", actor=shop["admin"].user
    )

    with page.expect_response(lambda r: r.url.endswith("/admin/") and r.status == 403):
        page.clock.run_for(31_000)

    notice = page.locator("#live-stopped")
    notice.wait_for(state="visible")
    assert notice.inner_text() == (
        f"This page stopped updating. Your role does not allow this. {RELOAD}"
    )
    assert re.fullmatch(r"Refreshed \d\d:\d\d:\d\d \w+; no longer refreshed\.", line.inner_text())
    _shoot(page, "live-stopped-health")
    sent = _polls_sent(page)
    page.clock.run_for(65_000)
    page.wait_for_timeout(300)
    assert sent == []


def test_a_draft_page_says_it_stopped_updating_when_the_tenant_is_suspended_meanwhile(
    page, shop, member_of
):
    approver = member_of(shop["tenant"], "approver")
    draft = new_draft(shop)
    page.clock.install()
    sign_in(page, approver.user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    page.wait_for_load_state("networkidle")
    onboarding.tenant_suspend(slug=shop["tenant"].slug, reason="Unpaid invoice")

    notice = page.locator("#live-stopped")
    page.clock.run_for(6_100)  # a presence beat every 6 s
    notice.wait_for(state="visible")

    assert notice.inner_text() == (
        f"This page stopped updating. This tenant is suspended; it is read-only. {RELOAD}"
    )


def test_a_suspended_tenants_pages_raise_no_alarm(page, shop, member_of):
    approver = member_of(shop["tenant"], "approver")
    draft = new_draft(shop)
    onboarding.tenant_suspend(slug=shop["tenant"].slug, reason="Unpaid invoice")
    page.clock.install()
    sign_in(page, approver.user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    page.wait_for_load_state("networkidle")

    with page.expect_response(lambda r: "/nav/counts/" in r.url and r.ok):
        page.evaluate("htmx.trigger('#nav-counts', 'cs:refresh')")
    page.goto(f"/t/{shop['tenant'].slug}/")
    page.wait_for_load_state("networkidle")
    page.clock.run_for(16_000)  # three of the queue's polls, one of the counts'
    page.wait_for_timeout(300)

    assert page.locator("#live-stopped").is_hidden()
    assert page.locator("#request-error").is_hidden()


def test_a_poll_that_fails_once_says_nothing_and_a_lasting_outage_is_said_softly(
    page, shop, member_of
):
    page.clock.install()
    _on_the_queue(page, shop, member_of)
    notice = page.locator("#live-stopped")
    page.route("**/queue/changes/**", lambda route: route.abort("internetdisconnected"))
    page.route("**/nav/counts/**", lambda route: route.abort("internetdisconnected"))

    with page.expect_event("requestfailed"):
        page.clock.run_for(5_100)
    page.wait_for_timeout(300)
    assert notice.is_hidden()

    page.clock.run_for(40_000)
    notice.wait_for(state="visible")
    assert notice.inner_text() == (
        "The server could not be reached for a while: this page may be out of date. "
        "It keeps trying."
    )
    assert notice.locator("a").is_hidden()  # nothing to do but wait
    _shoot(page, "live-unreachable")

    page.unroute("**/queue/changes/**")
    page.unroute("**/nav/counts/**")
    with page.expect_response(lambda r: "/queue/changes/" in r.url and r.ok):
        page.clock.run_for(5_100)
    notice.wait_for(state="hidden")


def test_a_session_signed_out_elsewhere_takes_the_queue_tab_to_sign_in(page, shop, member_of):
    page.clock.install()
    _on_the_queue(page, shop, member_of)
    queue_path = f"/t/{shop['tenant'].slug}/"
    Session.objects.all().delete()

    page.clock.run_for(5_100)  # the next poll
    page.wait_for_url(re.compile(r"/signin/"))

    assert parse_qs(urlsplit(page.url).query) == {"next": [queue_path]}
