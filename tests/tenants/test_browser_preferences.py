"""In headless Chromium: a person picks German and their browser's zone on the preferences page
(reached from their name in the top bar) and from then on reads the navigation in German and
times in Berlin time; a second person already set to Spanish sees Spanish."""

import re
import zoneinfo

import pytest
from django.utils import timezone

from tests.browser import BROWSER_MARKS, sign_in

pytestmark = BROWSER_MARKS

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")


@pytest.fixture
def person(transactional_db, tenant_a, member_of):
    return member_of(tenant_a, "approver").user


@pytest.fixture
def berlin_page(chromium, live_server):
    """A browser in Berlin whose language is English, so that German can only come from the
    person's own choice."""
    context = chromium.new_context(
        base_url=live_server.url, timezone_id="Europe/Berlin", locale="en-US"
    )
    tab = context.new_page()
    tab.set_default_timeout(10_000)
    yield tab
    context.close()


def test_choosing_german_and_the_browser_zone_changes_nav_and_times(berlin_page, person):
    page = berlin_page
    sign_in(page, person)
    assert page.locator(".mainnav").inner_text().split() == [
        "Queue",
        "Mine",
        "Escalated",
        "Outbox",
        "Broadcasts",
        "Needs",
        "attention",
    ]
    page.click(f".topbar a.user:text('{person.display_name}')")
    page.wait_for_url("**/preferences/")
    page.select_option("#id_language", "de")
    # The page offers the zone the browser reports (Intl), without sending it anywhere itself.
    hint = page.locator("#browser-zone")
    assert hint.is_visible() and hint.locator("[data-browser-zone]").inner_text() == "Europe/Berlin"
    page.click("[data-use-browser-zone]")
    assert page.input_value("#id_time_zone") == "Europe/Berlin"
    page.click("button[type=submit]")
    page.wait_for_selector("text=Ihre Einstellungen sind gespeichert.")
    person.refresh_from_db()
    assert (person.language, person.time_zone) == ("de", "Europe/Berlin")
    assert page.locator("html").get_attribute("lang") == "de"
    shown = page.locator("#zone-now").inner_text()
    berlin_now = timezone.now().astimezone(BERLIN)
    assert berlin_now.strftime("%H:") in shown and berlin_now.strftime("%Z") in shown
    assert "Europe/Berlin" in shown
    page.click(".brand")
    page.wait_for_url(re.compile(r"/t/[\w-]+/$"))
    assert page.locator(".mainnav").inner_text().split() == [
        "Warteschlange",
        "Meine",
        "Eskaliert",
        "Postausgang",
        "Rundsendungen",
        "Zu",
        "prüfen",
    ]
    assert page.locator(".topbar button").inner_text() == "Abmelden"


def test_a_spanish_user_reads_spanish_whatever_the_browser_says(berlin_page, person):
    person.language, person.time_zone = "es", "America/Mexico_City"
    person.save(update_fields=["language", "time_zone"])
    page = berlin_page
    sign_in(page, person)
    assert page.locator(".mainnav").inner_text().split() == [
        "Cola",
        "Míos",
        "Escalados",
        "Bandeja",
        "de",
        "salida",
        "Envíos",
        "masivos",
        "Requiere",
        "atención",
    ]
    page.goto("/preferences/")
    assert page.locator("h1").inner_text() == "Tus preferencias"
    # The stored zone is kept: the browser's different one is offered, not imposed.
    assert page.input_value("#id_time_zone") == "America/Mexico_City"
    assert page.locator("#browser-zone").is_visible()
    assert re.search(r"America/Mexico_City", page.locator("#zone-now").inner_text())
