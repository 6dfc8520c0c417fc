"""A failed htmx request in headless Chromium: the page says so, in one alert near the top, in
the server's own words when it answered with one of our error pages, and never as the server's
HTML; a session that ended takes the tab to the sign-in page instead of swapping that page into
the decision box. (htmx swaps nothing of a 4xx/5xx answer, so the click seemed to do nothing.)"""

import os
import re
from urllib.parse import parse_qs, urlsplit

from django.contrib.sessions.models import Session

from intents import services
from intents.models import SendIntent
from tenants import services as tenant_services
from tests.browser import BROWSER_MARKS, new_draft, sign_in
from tests.factories import PASSWORD

pytestmark = BROWSER_MARKS

RELOAD = "Reload the page to see where things stand."


def _shoot(page, name):
    if shots := os.environ.get("SCREENSHOT_DIR"):
        page.screenshot(path=f"{shots}/{name}.png")


def _on_the_draft(page, shop, member_of):
    approver = member_of(shop["tenant"], "approver")
    draft = new_draft(shop, text="Hello,\n\n" + "We refunded your order today.\n\n" * 30 + "Ana")
    page.clock.install()  # the page's timers move when a test moves them on
    sign_in(page, approver.user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    page.wait_for_load_state("networkidle")  # the first presence beat is answered
    return approver, draft


def test_an_approver_demoted_since_the_page_loaded_is_told_why_approve_did_nothing(
    page, shop, member_of
):
    approver, draft = _on_the_draft(page, shop, member_of)
    alert = page.locator("#request-error")
    assert alert.is_hidden()
    tenant_services.member_set_role(
        tenant=shop["tenant"], membership_id=approver.pk, role="viewer", actor=shop["admin"].user
    )

    # Read to the end of the long reply, then approve with the shortcut.
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    page.keyboard.press("a")

    alert.wait_for(state="visible")
    assert alert.get_attribute("role") == "alert"
    assert alert.inner_text() == f"Your role does not allow this. {RELOAD}"
    assert page.evaluate("window.scrollY") > 500
    assert alert.evaluate("a => a.getBoundingClientRect().top") == 0  # in view: sticky
    assert page.locator("#decision [data-approve]").is_visible()  # nothing was swapped
    assert not SendIntent.objects.filter(draft=draft).exists()
    _shoot(page, "request-error-demoted")

    # The page's own polls neither hide it nor say anything: a presence beat succeeds (the
    # next one, brought on by moving the page's clock past the 6 s between beats).
    with page.expect_response(lambda r: "/presence/" in r.url and r.ok):
        page.clock.fast_forward(6_000)
    with page.expect_response(lambda r: "/nav/counts/" in r.url and r.ok):
        page.evaluate("htmx.trigger('#nav-counts', 'cs:refresh')")
    page.wait_for_timeout(100)  # htmx handles the answer after Playwright sees it
    assert alert.is_visible()


def test_no_answer_is_said_and_a_later_request_that_succeeds_hides_it(page, shop, member_of):
    _approver, draft = _on_the_draft(page, shop, member_of)
    page.route("**/approve/", lambda route: route.abort("internetdisconnected"))

    page.click("[data-approve]")

    alert = page.locator("#request-error")
    alert.wait_for(state="visible")
    assert alert.inner_text() == (
        "The server could not be reached. Reload the page to see whether it was done."
    )
    _shoot(page, "request-error-unreachable")
    # The network is back; a colleague changed the draft meanwhile. The refusal (a fragment,
    # 200) replaces the decision box, and the alert goes.
    page.unroute("**/approve/")
    _new_version(shop, draft)
    page.clock.fast_forward(4_100)  # the approve form takes a second click after 4 s (app.js)
    page.click("[data-approve]")
    page.wait_for_selector('#decision [data-refusal="stale_version"]')
    assert alert.is_hidden()
    assert not SendIntent.objects.filter(draft=draft).exists()


def test_a_proxy_error_page_is_not_read_as_the_servers_words(page, shop, member_of):
    _on_the_draft(page, shop, member_of)
    page.route(
        "**/approve/",
        lambda route: route.fulfill(
            status=502,
            content_type="text/html",
            body="<html><body><main><p>upstream gone</p></main></body></html>",
        ),
    )

    page.click("[data-approve]")

    alert = page.locator("#request-error")
    alert.wait_for(state="visible")
    assert alert.inner_text() == f"The server could not do this (error 502). {RELOAD}"


def _new_version(shop, draft):
    current = draft.versions.get(number=1)
    services.draft_add_version(
        tenant=shop["tenant"],
        draft_id=draft.pk,
        base_version=1,
        to=current.to,
        cc=[],
        bcc=[],
        subject=current.subject,
        text="Hello,\n\nA colleague's version.\n\nBest regards",
        html="",
        actor_user=shop["admin"].user,
    )


def test_a_session_ended_elsewhere_takes_the_tab_to_sign_in_and_back(page, shop, member_of):
    approver, draft = _on_the_draft(page, shop, member_of)
    draft_path = f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/"
    Session.objects.all().delete()

    page.click("[data-approve]")

    page.wait_for_url(re.compile(r"/signin/"))
    assert parse_qs(urlsplit(page.url).query) == {"next": [draft_path]}
    assert page.locator("#decision").count() == 0
    assert not SendIntent.objects.filter(draft=draft).exists()
    page.fill("input[name=username]", approver.user.email)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"**{draft_path}")
    assert page.locator("[data-approve]").is_visible()
