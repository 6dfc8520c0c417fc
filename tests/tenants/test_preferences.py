"""A person's language and time zone: the preferences page, its refusals, and what each request
then speaks and shows (tenants.preferences, tenants.middleware)."""

import datetime as dt

import pytest
from django.template import Context, Template
from django.urls import reverse
from django.utils import timezone, translation

from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db

PREFS = reverse("preferences")


@pytest.fixture(autouse=True)
def _english_afterwards():
    """A request leaves its language active on the thread (Django's LocaleMiddleware does not
    reset it): tests of other modules that run next on this thread expect English."""
    yield
    translation.deactivate()


@pytest.fixture
def member(member_of, tenant_a):
    return member_of(tenant_a, "approver")


def tenant_page(client, membership, **headers):
    return client.get(reverse("tenant_home", args=[membership.tenant.slug]), headers=headers)


def nav_text(response) -> str:
    return response.content.decode().split('<main id="main">')[0]


def test_a_german_user_gets_the_nav_in_german(signed_in, member):
    member.user.language = "de"
    member.user.save(update_fields=["language"])
    response = tenant_page(signed_in(member.user), member, accept_language="es")
    nav = nav_text(response)
    assert ">Warteschlange <" in nav and ">Postausgang<" in nav and "Abmelden" in nav
    assert ">Queue<" not in nav
    assert '<html lang="de">' in response.content.decode()
    assert response["Content-Language"] == "de"


def test_a_spanish_user_gets_the_nav_in_spanish(signed_in, member):
    member.user.language = "es"
    member.user.save(update_fields=["language"])
    nav = nav_text(tenant_page(signed_in(member.user), member, accept_language="de"))
    assert ">Cola <" in nav and ">Bandeja de salida<" in nav and "Cerrar sesión" in nav


def test_without_a_choice_the_browser_language_decides(signed_in, member):
    client = signed_in(member.user)
    assert ">Warteschlange <" in nav_text(tenant_page(client, member, accept_language="de-DE,de"))
    assert ">Cola <" in nav_text(tenant_page(client, member, accept_language="es-MX,es;q=0.9"))
    # A language we do not offer falls back to English.
    assert ">Queue <" in nav_text(tenant_page(client, member, accept_language="fr-FR"))


def test_the_signed_out_sign_in_page_follows_the_browser(client):
    page = client.get(reverse("login"), headers={"accept-language": "de"}).content.decode()
    assert "<h1>Anmelden</h1>" in page and "Passwort" in page
    page = client.get(reverse("login"), headers={"accept-language": "es"}).content.decode()
    assert "<h1>Iniciar sesión</h1>" in page and "Contraseña" in page


def test_the_user_name_in_the_top_bar_leads_to_the_preferences(signed_in, member):
    page = tenant_page(signed_in(member.user), member).content.decode()
    assert f'href="{PREFS}"' in page


def test_preferences_need_a_signed_in_user(client):
    response = client.get(PREFS)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    response = client.post(PREFS, {"language": "de", "time_zone": "Europe/Berlin"})
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_saving_preferences_stores_them_and_audits_the_change(signed_in, member):
    client = signed_in(member.user)
    response = client.post(PREFS, {"language": "de", "time_zone": "Europe/Berlin"})
    assert response.status_code == 302
    member.user.refresh_from_db()
    assert (member.user.language, member.user.time_zone) == ("de", "Europe/Berlin")
    audit = AuditEvent.objects.get(action="user.preferences_changed", actor=member.user)
    assert audit.data == {
        "before": {"language": "", "time_zone": ""},
        "after": {"language": "de", "time_zone": "Europe/Berlin"},
    }
    # The confirmation is already in the new language.
    assert "Ihre Einstellungen sind gespeichert." in client.get(PREFS).content.decode()


def test_an_unknown_language_is_refused_with_the_choices_and_nothing_changes(signed_in, member):
    response = signed_in(member.user).post(PREFS, {"language": "fr", "time_zone": "Europe/Berlin"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "“fr” is not a language Countersign offers" in page
    assert "English (en), Español (es), Deutsch (de)" in page
    member.user.refresh_from_db()
    assert (member.user.language, member.user.time_zone) == ("", "")
    assert not AuditEvent.objects.filter(action="user.preferences_changed").exists()


@pytest.mark.parametrize(
    "zone", ["Mars/Olympus_Mons", "Central European", "europe/berlin", "+01:00", "../etc"]
)
def test_an_unknown_time_zone_is_refused_and_nothing_changes(signed_in, member, zone):
    response = signed_in(member.user).post(PREFS, {"language": "es", "time_zone": zone})
    assert response.status_code == 400
    assert "is not a time zone name. Use an IANA name such as Europe/Berlin" in (
        response.content.decode()
    )
    member.user.refresh_from_db()
    assert (member.user.language, member.user.time_zone) == ("", "")


def test_the_refusal_is_in_the_user_language(signed_in, member):
    client = signed_in(member.user)
    page = client.post(
        PREFS, {"language": "", "time_zone": "Nowhere/Land"}, headers={"accept-language": "de"}
    ).content.decode()
    assert "„Nowhere/Land“ ist kein Zeitzonenname" in page


def test_blank_choices_mean_browser_language_and_utc(signed_in, member):
    member.user.language, member.user.time_zone = "de", "Europe/Berlin"
    member.user.save(update_fields=["language", "time_zone"])
    client = signed_in(member.user)
    assert client.post(PREFS, {"language": "", "time_zone": ""}).status_code == 302
    member.user.refresh_from_db()
    assert (member.user.language, member.user.time_zone) == ("", "")
    page = client.get(PREFS, headers={"accept-language": "es"}).content.decode()
    assert "Tus preferencias" in page and "(Zona horaria: UTC)" in page


def test_times_follow_the_user_zone_per_request(signed_in, member, member_of, tenant_a):
    member.user.time_zone = "America/Mexico_City"
    member.user.save(update_fields=["time_zone"])
    page = signed_in(member.user).get(PREFS).content.decode()
    assert "America/Mexico_City" in page
    now_mx = timezone.now().astimezone(dt.timezone(dt.timedelta(hours=-6)))
    assert now_mx.strftime("%H:") in page.split('id="zone-now"')[1]


def test_the_zone_does_not_leak_to_the_next_request(signed_in, member, client):
    member.user.time_zone = "Asia/Tokyo"
    member.user.save(update_fields=["time_zone"])
    signed_in(member.user).get(PREFS)
    assert timezone.get_current_timezone_name() == "UTC"


def test_a_zone_that_vanished_from_tzdata_falls_back_to_utc(signed_in, member):
    member.user.time_zone = "Atlantis/Capital"  # written behind the service's back
    member.user.save(update_fields=["time_zone"])
    response = signed_in(member.user).get(PREFS)
    assert response.status_code == 200 and "(Time zone: UTC)" in response.content.decode()


def test_zoned_filter_shows_the_zone_abbreviation():
    moment = dt.datetime(2026, 12, 1, 12, 5, tzinfo=dt.UTC)
    template = Template('{% load zones %}{{ t|zoned }} | {{ t|zoned:"H:i" }} | {% current_zone %}')
    import zoneinfo

    with timezone.override(zoneinfo.ZoneInfo("Europe/Berlin")), translation.override("de"):
        assert (
            template.render(Context({"t": moment}))
            == "1 Dez 2026, 13:05 CET | 13:05 CET | Europe/Berlin"
        )
    with timezone.override(zoneinfo.ZoneInfo("Europe/Berlin")):
        summer = dt.datetime(2026, 7, 1, 12, 5, tzinfo=dt.UTC)
        assert template.render(Context({"t": summer})).startswith("1 Jul 2026, 14:05 CEST")
    assert template.render(Context({"t": moment})) == "1 Dec 2026, 12:05 UTC | 12:05 UTC | UTC"
    assert template.render(Context({"t": None})) == " |  | UTC"


def test_a_draft_whose_words_are_msgids_is_shown_unchanged_to_a_german_user(
    signed_in, member, mailbox_a, make_draft
):
    """Only the UI's own text is translated: a customer's mail or a draft that happens to say
    "Queue", "Accept" or "Sign out" (entries of the German catalogue) is shown as written."""
    text = "Approve\nQueue\nAccept\nSign out\nNeeds attention"
    draft = make_draft(mailbox_a, subject="Outbox", text=text)
    member.user.language = "de"
    member.user.save(update_fields=["language"])
    response = signed_in(member.user).get(reverse("draft", args=[member.tenant.slug, draft.pk]))
    page = response.content.decode()
    assert f'<pre class="body-text" data-customer-content>\n{text}</pre>' in page
    assert "<h1 data-customer-content>Outbox</h1>" in page
    assert ">Warteschlange <" in nav_text(response)


def test_a_stored_language_no_longer_offered_falls_back_to_the_browser(signed_in, member):
    member.user.language = "fr"  # written behind the service's back, or a language withdrawn
    member.user.save(update_fields=["language"])
    response = tenant_page(signed_in(member.user), member, accept_language="es")
    assert ">Cola <" in nav_text(response) and response["Content-Language"] == "es"


def test_a_refused_sign_in_and_the_lockout_speak_the_browser_language(client, member, settings):
    def attempt(password):
        return client.post(
            reverse("login"),
            {"username": member.user.email, "password": password},
            REMOTE_ADDR="10.0.0.7",
            headers={"accept-language": "de"},
        )

    assert "Bitte" in attempt("wrong-password").content.decode()  # Django's own German
    for _ in range(settings.AXES_FAILURE_LIMIT):
        attempt("wrong-password")
    locked = attempt("still-wrong")
    assert locked.status_code == 429
    assert "Zu viele fehlgeschlagene Anmeldungen" in locked.content.decode()


def test_both_refusals_are_shown_at_once_and_tied_to_their_fields(signed_in, member):
    page = (
        signed_in(member.user)
        .post(PREFS, {"language": "klingon", "time_zone": "Nowhere/Land"})
        .content.decode()
    )
    assert "“klingon” is not a language" in page and "“Nowhere/Land” is not a time zone" in page
    assert 'aria-describedby="id_time_zone_helptext id_time_zone_error"' in page
    assert 'id="id_time_zone_error"' in page and 'id="id_language_error"' in page


@pytest.mark.parametrize(
    ("language", "time_zone", "field"),
    [("pt", "Europe/Berlin", "language"), ("de", "Berlin", "time_zone")],
)
def test_the_service_itself_refuses_and_changes_nothing(member, language, time_zone, field):
    from tenants.preferences import user_set_preferences
    from tenants.services import AdminError

    with pytest.raises(AdminError) as refused:
        user_set_preferences(user=member.user, language=language, time_zone=time_zone)
    assert refused.value.field == field
    member.user.refresh_from_db()
    assert (member.user.language, member.user.time_zone) == ("", "")
    assert not AuditEvent.objects.filter(action="user.preferences_changed").exists()


# --- names that are files of a zone tree but not zones -----------------------------------------


@pytest.mark.parametrize("zone", ["localtime", "posixrules", "Factory"])
def test_zone_tree_files_that_are_no_iana_zone_are_refused(signed_in, member, zone):
    """'localtime' is the host's /etc/localtime: times would follow the server's configuration
    and be labelled "localtime". zoneinfo.available_timezones() lists it on Debian hosts."""
    response = signed_in(member.user).post(PREFS, {"language": "", "time_zone": zone})
    assert response.status_code == 400
    member.user.refresh_from_db()
    assert member.user.time_zone == ""
    assert not AuditEvent.objects.filter(action="user.preferences_changed").exists()


def test_the_offered_zones_are_the_accepted_ones_and_each_loads(signed_in, member):
    import re
    import zoneinfo

    from tenants.preferences import time_zone_names

    page = signed_in(member.user).get(PREFS).content.decode()
    offered = set(re.findall(r'<option value="([^"]+)">', page.split('id="time-zones"')[1]))
    assert offered == time_zone_names()
    assert {"UTC", "Europe/Berlin", "America/Mexico_City", "Asia/Tokyo"} <= offered
    assert not offered & {"localtime", "posixrules", "Factory"}
    assert all(zoneinfo.ZoneInfo(name) for name in offered)


@pytest.mark.parametrize("stored", ["Europe", "America", "Etc", "localtime"])
def test_a_stored_name_that_is_no_zone_falls_back_to_utc(signed_in, member, stored):
    """Written behind the service's back (a shell, a data fix) or by an older release: a folder
    of the zone tree raised IsADirectoryError, a 500 on every page of that person, the
    preferences page where they would fix it included."""
    member.user.time_zone = stored
    member.user.save(update_fields=["time_zone"])
    client = signed_in(member.user)
    for url in (PREFS, reverse("tenant_home", args=[member.tenant.slug])):
        assert client.get(url).status_code == 200
    assert "(Time zone: UTC)" in client.get(PREFS).content.decode()


# --- hostile values, headers and cookies --------------------------------------------------------


def _unchanged(user) -> bool:
    user.refresh_from_db()
    return (user.language, user.time_zone) == ("", "") and not AuditEvent.objects.filter(
        action="user.preferences_changed"
    ).exists()


@pytest.mark.parametrize(
    "data",
    [
        {"language": "d\x00e", "time_zone": ""},
        {"language": "", "time_zone": "Europe/Ber\x00lin"},
        {"language": "de" * 500_000, "time_zone": ""},
        {"language": "", "time_zone": "Europe/Berlin" * 10_000},
        {"language": "de\r\nX-Injected: 1", "time_zone": ""},
        {"language": "", "time_zone": "/usr/share/zoneinfo/UTC"},
        {"language": "EN", "time_zone": ""},
    ],
)
def test_hostile_values_are_refused_with_400_and_change_nothing(signed_in, member, data):
    response = signed_in(member.user).post(PREFS, data)
    assert response.status_code == 400
    assert "X-Injected" not in response.headers
    assert _unchanged(member.user)


def test_invalid_utf8_in_the_post_body_is_a_400_not_a_500(signed_in, member):
    body = b"language=%FF%FE&time_zone=%ED%A0%80"  # invalid UTF-8, an encoded lone surrogate
    response = signed_in(member.user).post(
        PREFS, body, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 400
    assert _unchanged(member.user)


@pytest.mark.parametrize("field", ["language", "time_zone"])
def test_a_refused_value_is_shown_escaped(signed_in, member, field):
    data = {"language": "", "time_zone": "", field: '"><script>alert(1)</script>'}
    response = signed_in(member.user).post(PREFS, data)
    assert response.status_code == 400
    assert b"<script>alert(1)</script>" not in response.content


@pytest.mark.parametrize(
    "accept",
    [
        "de" + ",xx" * 2000,
        "de;q=abc",
        "de\x00",
        "*;q=1, ../../etc;q=0.9",
        "x" * 10_000,
        "de;q=NaN,es;q=inf",
        "es;q=-1,de;q=0.5",
    ],
)
def test_odd_accept_language_headers_do_not_break_pages(client, accept):
    response = client.get(reverse("login"), headers={"accept-language": accept})
    assert response.status_code == 200
    assert response["Content-Language"] in {"en", "es", "de"}


@pytest.mark.parametrize("cookie", ["xx", "../de", "de\\x00", "de;", "zz-ZZ"])
def test_a_tampered_language_cookie_is_ignored(client, cookie):
    client.cookies["django_language"] = cookie
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert response["Content-Language"] == "en"


def test_the_user_choice_wins_over_a_language_cookie(signed_in, member):
    member.user.language = "es"
    member.user.save(update_fields=["language"])
    client = signed_in(member.user)
    client.cookies["django_language"] = "de"
    assert tenant_page(client, member)["Content-Language"] == "es"


def test_a_stored_language_and_zone_with_junk_do_not_break_pages(signed_in, member):
    member.user.language = "DE\x01"
    member.user.time_zone = "Europe/Berlin\n"
    member.user.save(update_fields=["language", "time_zone"])
    response = tenant_page(signed_in(member.user), member)
    assert response.status_code == 200
    assert response["Content-Language"] == "en"


def test_one_user_in_two_tenants_sees_their_language_in_both(
    signed_in, member_of, tenant_a, tenant_b
):
    first = member_of(tenant_a, "approver")
    second = member_of(tenant_b, "viewer", user=first.user)
    client = signed_in(first.user)
    assert client.post(PREFS, {"language": "de", "time_zone": "Asia/Tokyo"}).status_code == 302
    for membership in (first, second):
        assert tenant_page(client, membership)["Content-Language"] == "de"
