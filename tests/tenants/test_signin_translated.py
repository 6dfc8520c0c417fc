"""The sign-in pages speak the person's language: for a German user, the second-factor step and
the security page show no English word of their templates (read from the committed catalogue, so
a string that loses its translation fails here), and nothing of the English page is left over
(which catches a string nobody wrapped)."""

import re
import time
from html.parser import HTMLParser
from pathlib import Path

import polib
import pyotp
import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

CATALOGUE = Path(settings.BASE_DIR) / "locale" / "de" / "LC_MESSAGES" / "django.po"
# Text the pages show in every language besides the person and their tenants' names.
SAME_IN_EVERY_LANGUAGE = {"Countersign", "·", "—"}


@pytest.fixture(autouse=True)
def _no_throttle_delay(settings):
    settings.OTP_TOTP_THROTTLE_FACTOR = 0


class _Visible(HTMLParser):
    """Text a person sees or hears: text nodes (not scripts) and the attributes read out or shown."""

    ATTRIBUTES = ("aria-label", "title", "placeholder", "alt", "data-cancelled", "data-failed")

    def __init__(self):
        super().__init__()
        self.chunks: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        for name, value in attrs:
            if name in self.ATTRIBUTES and value:
                self.chunks.append(value.strip())

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip and data.strip():
            self.chunks.append(" ".join(data.split()))


def visible(response) -> list[str]:
    parser = _Visible()
    parser.feed(response.content.decode())
    return parser.chunks


def english_msgids(*templates: str) -> list[str]:
    """The msgids of these templates whose German differs from the English."""
    return [
        entry.msgid
        for entry in polib.pofile(str(CATALOGUE))
        if any(path in templates for path, _line in entry.occurrences)
        and (entry.msgstr or entry.msgstr_plural.get(0)) not in ("", entry.msgid)
    ]


def same_in_german() -> set[str]:
    """Words German borrows as they are ("Passkeys")."""
    return {entry.msgid for entry in polib.pofile(str(CATALOGUE)) if entry.msgstr == entry.msgid}


def english_left(response, templates: tuple[str, ...]) -> list[str]:
    text = "\n".join(visible(response))
    found = []
    for msgid in english_msgids(*templates):
        # The words of the msgid around its placeholders, each as a whole word or phrase.
        for part in re.split(r"%\(\w+\)[sd]|<[^>]+>", msgid):
            part = part.strip(" .,:;")
            if len(part) > 1 and re.search(rf"(?<!\w){re.escape(part)}(?!\w)", text):
                found.append(part)
    return found


@pytest.fixture
def owing_a_factor(tenant_a, member_of, password):
    """A German approver with an authenticator app, signed in with the password only, and the
    app's secret."""
    user = member_of(tenant_a, "approver").user
    enrol = Client()
    enrol.post(reverse("login"), {"username": user.email, "password": password})
    secret = enrol.post(reverse("totp_enrol")).context["secret"]
    assert (
        enrol.post(reverse("totp_confirm"), {"code": pyotp.TOTP(secret).now()}).status_code == 200
    )
    user.language = "de"
    user.save(update_fields=["language"])
    client = Client()
    client.post(reverse("login"), {"username": user.email, "password": password})
    return client, user, secret


def leftovers(client, user, url) -> list[str]:
    """Chunks of the page that are the same in English and German (the English render first)."""
    user.language = "en"
    user.save(update_fields=["language"])
    english = set(visible(client.get(url)))
    user.language = "de"
    user.save(update_fields=["language"])
    german = visible(client.get(url))
    tenants = user.memberships.values_list("tenant__name", flat=True)
    ours = {user.email, user.display_name, *tenants, *SAME_IN_EVERY_LANGUAGE, *same_in_german()}
    return [chunk for chunk in german if chunk in english and chunk not in ours]


def test_the_second_factor_step_is_in_german(owing_a_factor):
    client, user, _secret = owing_a_factor
    page = client.get(reverse("two_factor_verify"), headers={"accept-language": "en"})
    assert page.status_code == 200
    assert '<html lang="de">' in page.content.decode()
    assert "Noch ein Schritt" in visible(page)
    templates = ("templates/tenants/two_factor_verify.html", "templates/base.html")
    assert english_left(page, templates) == []
    assert leftovers(client, user, reverse("two_factor_verify")) == []


def test_a_wrong_code_is_refused_in_german(owing_a_factor):
    client, _user, _secret = owing_a_factor
    page = client.post(reverse("two_factor_verify"), {"code": "000000"})
    assert page.status_code == 400
    assert "Dieser Code stimmt nicht oder wurde bereits verwendet." in page.content.decode()


def test_the_security_page_is_in_german(owing_a_factor):
    client, user, secret = owing_a_factor
    code = pyotp.TOTP(secret).at(time.time() + 30)  # later than the code used at enrolment
    assert client.post(reverse("two_factor_verify"), {"code": code}).status_code == 302
    page = client.get(reverse("account_security"), headers={"accept-language": "en"})
    assert page.status_code == 200
    text = visible(page)
    assert "Anmeldung und Sicherheit" in text and "Zwei-Faktor-Anmeldung ausschalten" in text
    assert "10 Wiederherstellungscodes übrig." in text
    templates = ("templates/tenants/account_security.html", "templates/base.html")
    assert english_left(page, templates) == []
    assert leftovers(client, user, reverse("account_security")) == []
