"""The administration pages speak the reader's language and show times in their zone (issue 16).

Each page is rendered for the same admin in English and then in German or Spanish; a piece of
text (a text node, a placeholder, an aria-label, a title) that reads the same in both is English
left behind, unless it is the tenant's own data (names, addresses) or a word the language shares.
"""

from __future__ import annotations

import re
from datetime import timedelta
from html.parser import HTMLParser
from pprint import pformat

import pytest
from django.urls import reverse
from django.utils import timezone

from console import services as console_services
from intents.models import Suppression
from tenants import invitations, services
from tenants.tokens import token_create
from tests.pages import based_on

pytestmark = pytest.mark.django_db

# Words that are the same in English and the other language, or names nobody translates (the
# product, the zone's name, the agent API's scope codes).
NAMES = {"Countersign", "UTC", "drafts:read", "drafts:write"}
SAME = {
    "de": {"Status", "Details", "Name", "Person", "Webhooks", "Token", "Tokens", "optional"},
    "es": {"Webhooks", "Token", "Tokens", "no", "Ctrl"},
}
# Single words that are the same inside a longer text ("0 bytes": Django's own Spanish for the
# unit of a file size is "bytes").
SAME_WORDS = {"de": set(), "es": {"bytes"}}
WORD = re.compile(r"[A-Za-z][A-Za-z:]{2,}")


def left_in_english(text: str, lang: str) -> bool:
    """Whether a piece of text read the same in English holds a word that should not."""
    if text in SAME[lang]:
        return False
    return bool(set(WORD.findall(text)) - NAMES - SAME_WORDS[lang])


class _Texts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.texts: set[str] = set()
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        for name, value in attrs:
            if name in ("placeholder", "aria-label", "title") and value:
                self.texts.add(" ".join(value.split()))

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data):
        text = " ".join(data.split())
        if text and not self._skip:
            self.texts.add(text)


def texts(html: str) -> set[str]:
    parser = _Texts()
    parser.feed(html)
    return parser.texts


@pytest.fixture
def admin_pages(tenant_a, mailbox_a, admin_a, member_of):
    """Every administration page of tenant A with something in it to read."""
    actor = admin_a.user
    other = member_of(tenant_a, "approver")
    token, _plain = token_create(
        tenant=tenant_a,
        name="triage-bot",
        scopes=["drafts:read"],
        expires_at=timezone.now() + timedelta(days=7),
        actor=actor,
    )
    console_services.suppression_add(
        tenant=tenant_a, address="gone@example.com", note="asked us to stop", actor=actor
    )
    Suppression.objects.create(tenant=tenant_a, address="bounce@example.com", reason="bounced")
    invitations.invitation_create(
        tenant=tenant_a,
        email="new.person@example.com",
        full_name="",
        role="viewer",
        approve_all_mailboxes=True,
        mailbox_ids=[],
        actor=actor,
    )
    services.member_set_role(tenant=tenant_a, membership_id=other.pk, role="viewer", actor=actor)
    slug = tenant_a.slug
    pages = [
        reverse(name, args=[slug])
        for name in (
            "admin_home",
            "admin_members",
            "admin_policies",
            "admin_recipients",
            "admin_suppressions",
            "admin_webhooks",
            "admin_audit",
            "token_list",
            "mailbox_list",
            "mailbox_create",
        )
    ]
    pages += [
        reverse("admin_member", args=[slug, other.pk]),
        reverse("admin_member_deactivate", args=[slug, other.pk]),
        reverse("token_revoke", args=[slug, token.pk]),
        reverse("mailbox_detail", args=[slug, mailbox_a.pk]),
    ]
    data = {
        tenant_a.name,
        mailbox_a.address,
        actor.display_name,
        actor.email,
        other.user.display_name,
        other.user.email,
        "triage-bot",
        token.prefix,
        "gone@example.com",
        "bounce@example.com",
        "asked us to stop",
        "new.person@example.com",
    }
    return pages, data


def _leftovers(client, user, url, lang, data):
    user.language = ""
    user.save(update_fields=["language"])
    english = texts(client.get(url).content.decode())
    user.language = lang
    user.save(update_fields=["language"])
    page = client.get(url)
    assert page.status_code == 200, url
    return sorted(
        text
        for text in texts(page.content.decode()) & english
        if left_in_english(text, lang) and not any(value and value in text for value in data)
    )


@pytest.mark.parametrize("lang", ["de", "es"])
def test_no_english_is_left_on_the_administration_pages(lang, admin_pages, admin_a, signed_in):
    pages, data = admin_pages
    client = signed_in(admin_a.user)
    left = {
        url: words for url in pages if (words := _leftovers(client, admin_a.user, url, lang, data))
    }
    assert left == {}, pformat(left)


@pytest.mark.parametrize("lang", ["de", "es"])
def test_the_pages_shown_once_after_a_post_are_translated(
    lang, tenant_a, mailbox_a, admin_a, signed_in
):
    """The new invitation's link and the new token's plaintext are each shown by a POST answer."""
    user = admin_a.user
    client = signed_in(user)
    invite = {"email": "x@example.com", "role": "approver", "approve": "all"}
    new_token = {"name": "bot", "scopes": ["drafts:read"], "expires_in_days": "30"}
    data = {tenant_a.name, user.display_name, user.email, mailbox_a.address, "x@example.com"}
    english = texts(
        client.post(reverse("admin_members", args=[tenant_a.slug]), invite).content.decode()
    )
    english |= texts(
        client.post(reverse("token_new", args=[tenant_a.slug]), new_token).content.decode()
    )
    user.language = lang
    user.save(update_fields=["language"])
    invite["email"] = "y@example.com"
    new_token["name"] = "bot-2"
    shown = texts(
        client.post(reverse("admin_members", args=[tenant_a.slug]), invite).content.decode()
    )
    shown |= texts(
        client.post(reverse("token_new", args=[tenant_a.slug]), new_token).content.decode()
    )
    left = sorted(
        t for t in shown & english if left_in_english(t, lang) and not any(v in t for v in data)
    )
    assert left == [], pformat(left)


def test_times_are_shown_in_the_readers_zone_and_never_as_utc(admin_pages, admin_a, signed_in):
    pages, _data = admin_pages
    user = admin_a.user
    user.time_zone = "America/Sao_Paulo"
    user.save(update_fields=["time_zone"])
    client = signed_in(user)
    for url in pages:
        # A script's nonce is 22 random characters, which now and then hold "UTC" (a red CI run).
        html = re.sub(r'nonce="[^"]*"', "", client.get(url).content.decode())
        assert "UTC" not in html, url
    home = client.get(reverse("admin_home", args=[admin_a.tenant.slug])).content.decode()
    audit = client.get(reverse("admin_audit", args=[admin_a.tenant.slug])).content.decode()
    # São Paulo has no abbreviation in the tz database: its offset is shown.
    assert re.search(r"Refreshed \d\d:\d\d:\d\d -03,", home)
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d -03<", audit)
    # A time kept in an audit row's data (the invitation's expiry) is shown in the zone too.
    assert "+00:00" not in audit
    assert re.search(r"<dd>\d+ \w+ \d{4}, \d\d:\d\d -03</dd>", audit)


def test_refusals_and_confirmations_come_in_the_readers_language(
    tenant_a, mailbox_a, admin_a, signed_in
):
    """Messages made in Python (forms, services of console, tenants and mailboxes, flashes)."""
    user = admin_a.user
    user.language = "de"
    user.save(update_fields=["language"])
    client = signed_in(user)
    slug = tenant_a.slug
    last_admin = client.post(
        reverse("admin_member_role", args=[slug, admin_a.pk]),
        {"role": "viewer", "based_on": services.member_role_fingerprint(admin_a)},
    )
    no_domain = client.post(
        reverse("mailbox_policy", args=[slug, mailbox_a.pk]),
        {"policy_mode": "restricted", "allowed_domains": "not a domain"},
    )
    client.post(
        reverse("admin_suppression_add", args=[slug]), {"address": "a@example.com", "note": "x"}
    )
    twice = client.post(
        reverse("admin_suppression_add", args=[slug]), {"address": "a@example.com", "note": "x"}
    )
    policies = reverse("admin_policies", args=[slug])
    saved = client.post(
        policies,
        {
            "review_deadline_hours": 8,
            "retention_days": 30,
            "send_hold_seconds": 0,
            "based_on": based_on(client, policies),
        },
        follow=True,
    )
    assert (
        "Ein Mandant braucht mindestens einen aktiven Administrator" in last_admin.content.decode()
    )
    assert "Kein Domainname: not a domain" in no_domain.content.decode()
    assert (
        "a@example.com ist bereits gesperrt (von einer Person hinzugefügt)."
        in twice.content.decode()
    )
    assert "Richtlinien gespeichert." in saved.content.decode()
