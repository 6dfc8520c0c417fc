"""Issue 16, "their language and their clock", on the review pages: in headless Chromium a reviewer
whose language is German (in Europe/Berlin) and one whose language is Spanish (in
America/Mexico_City) read the queue, a draft and the outbox with no English left in the UI's own
text, and every time we can compute in their own zone; the customer's and the draft's text are
shown exactly as written.

"No English left": the page's visible text (``innerText``), minus the elements marked
``data-customer-content`` (subjects, bodies, the thread, notes, reasons: what people and agents
wrote), must contain none of the English msgids whose translation differs in the reader's
language, read from the catalogues the pages draw on (review, intents, webhooks and the project's
own, for the navigation). The catalogues being complete is tests/tenants/test_translations.py's
job; this one checks that the pages actually go through them."""

from __future__ import annotations

import re
import zoneinfo
from datetime import timedelta
from pathlib import Path

import polib
import pytest
from django.conf import settings
from django.template.defaultfilters import date as date_filter
from django.utils import timezone, translation

from intents import services
from intents.models import Draft, DraftNote
from intents.services.presence import presence_beat
from tenants.models import Tenant
from tests.browser import BROWSER_MARKS, sign_in
from tests.factories import make_local_mailbox
from webhooks.models import InboundMessage

pytestmark = BROWSER_MARKS

ROOT = Path(settings.BASE_DIR)
CATALOGUES = ("review/locale", "intents/locale", "webhooks/locale", "locale")
PLACEHOLDER = re.compile(r"%\(\w+\)[sd]|\{\w+\}")
CUSTOMER_TEXT = "Hola, ¿dónde está mi pedido 48213? Lo pedí hace una semana."
DRAFT_TEXT = "Hello Marta,\n\nYour order left our warehouse today.\n\nBest regards"


def english_left(lang: str) -> list[tuple[str, re.Pattern]]:
    """(msgid, pattern) for every English text of the catalogues that the language translates
    differently: placeholders match any word, HTML in a msgid is not visible text."""
    found = []
    for place in CATALOGUES:
        for entry in polib.pofile(str(ROOT / place / lang / "LC_MESSAGES" / "django.po")):
            if "fuzzy" in entry.flags or not entry.msgid:
                continue
            pairs = [(entry.msgid, entry.msgstr)]
            if entry.msgid_plural:
                forms = [entry.msgstr_plural.get(i, "") for i in sorted(entry.msgstr_plural)]
                pairs = [(entry.msgid, forms[0]), (entry.msgid_plural, forms[-1])]
            for msgid, msgstr in pairs:
                if msgstr and msgstr != msgid:
                    found.append((msgid, visible_pattern(msgid)))
    return found


def visible_pattern(msgid: str) -> re.Pattern:
    text = re.sub(r"<[^>]+>", "", msgid).replace("&amp;", "&")
    parts = PLACEHOLDER.split(text)
    body = r"\S+".join(re.escape(part) for part in parts)
    # Whole words only, case-sensitive: "Take" is not found inside "Take it" translated, nor
    # "or" inside "order".
    start = r"\b" if re.match(r"\w", text) else ""
    end = r"\b" if re.search(r"\w$", text) else ""
    return re.compile(start + body + end)


def test_the_pattern_of_a_msgid():
    assert visible_pattern("Approve &amp; next").search("Approve & next")
    assert visible_pattern("%(n)s attempts").search("3 attempts")
    assert visible_pattern("%(n)s attempts").search("3 Versuche") is None
    assert visible_pattern("or").search("your order") is None
    assert visible_pattern(
        "Sending in <strong data-countdown>%(seconds)s</strong> seconds."
    ).search("Sending in 60 seconds.")


def own_text(page) -> str:
    """The page's visible text without what people and agents wrote (removed from the live page:
    the test reads it once, after its own checks of that content)."""
    return page.evaluate(
        """() => {
            document.querySelectorAll('[data-customer-content]').forEach((e) => e.remove());
            document.querySelectorAll('dialog:not([open])').forEach((e) => e.remove());
            return document.body.innerText;
        }"""
    )


def assert_no_english(page, lang: str, where: str) -> None:
    text = own_text(page)
    left = sorted({msgid for msgid, pattern in english_left(lang) if pattern.search(text)})
    assert left == [], f"{where} ({lang}) still shows English: {left}\n---\n{text}"


def shown(value, lang: str, zone: str, fmt: str) -> str:
    """What the zoned filter must print for this reader: their language's month, their zone's
    clock and its abbreviation."""
    with translation.override(lang), timezone.override(zoneinfo.ZoneInfo(zone)):
        local = timezone.localtime(value)
        return f"{date_filter(local, fmt)} {date_filter(local, 'T')}"


def build_team(tenant, member_of):
    """A realistic morning: a reply held by the Spanish reviewer, past its deadline and escalated,
    with the customer's message, a note and the German reviewer viewing it; a second draft inside
    its deadline; a third approved and waiting out its undo window in the outbox."""
    Tenant.objects.filter(pk=tenant.pk).update(send_hold_seconds=300, name="Tienda Norte")
    tenant.refresh_from_db()
    mailbox = make_local_mailbox(tenant, username="soporte")
    dieter = member_of(tenant, "admin").user
    lucia = member_of(tenant, "approver").user
    for user, name, lang, zone in (
        (dieter, "Dieter Köhler", "de", "Europe/Berlin"),
        (lucia, "Lucía Ramírez", "es", "America/Mexico_City"),
    ):
        user.full_name, user.language, user.time_zone = name, lang, zone
        user.save(update_fields=["full_name", "language", "time_zone"])
    now = timezone.now().replace(microsecond=0)
    received = now - timedelta(hours=3, minutes=17)
    InboundMessage.objects.create(
        tenant=tenant,
        mailbox=mailbox,
        thread_id="thr-marta",
        message_id="<marta-1@example.com>",
        sender="Marta Gil <marta@example.com>",
        subject="¿Dónde está mi pedido?",
        preview=CUSTOMER_TEXT,
        received_at=received,
    )
    held = services.draft_create(
        tenant=tenant,
        mailbox=mailbox,
        to=["marta@example.com"],
        subject=None,
        text=DRAFT_TEXT,
        in_reply_to="<marta-1@example.com>",
        actor_user=dieter,
    )
    services.draft_take(tenant=tenant, draft_id=held.pk, actor=lucia)
    escalated_at = now - timedelta(minutes=42)
    Draft.objects.filter(pk=held.pk).update(
        sla_due_at=now - timedelta(minutes=45),
        sla_warn_at=now - timedelta(hours=1),
        escalated_at=escalated_at,
        assigned_how=Draft.AssignedHow.ESCALATED,
        claim_expires_at=None,
    )
    services.draft_note_add(
        tenant=tenant, draft_id=held.pk, author=dieter, text="Lager sagt: heute verschickt."
    )
    soon = services.draft_create(
        tenant=tenant,
        mailbox=mailbox,
        to=["jonas.weber@example.com", "lager@example.com"],
        subject="Lieferung verspätet",
        text="Hallo Jonas,\n\nIhre Bestellung ist unterwegs.",
        actor_user=lucia,
    )
    Draft.objects.filter(pk=soon.pk).update(
        sla_due_at=now + timedelta(hours=5), sla_warn_at=now + timedelta(hours=4)
    )
    sent = services.draft_create(
        tenant=tenant,
        mailbox=mailbox,
        to=["ana.perez@example.com"],
        subject="Tu reembolso del pedido 48100",
        text="Hola Ana,\n\nTe devolvimos 49,90 EUR.",
        actor_user=dieter,
    )
    version = sent.versions.get()
    intent = services.draft_approve(
        tenant=tenant,
        draft_id=sent.pk,
        version=1,
        content_hash=version.content_hash,
        actor=lucia,
    )
    return {
        "tenant": tenant,
        "dieter": dieter,
        "lucia": lucia,
        "held": Draft.objects.get(pk=held.pk),
        "received": received,
        "escalated_at": escalated_at,
        "note": DraftNote.objects.get(draft=held),
        "intent": intent,
    }


@pytest.fixture
def team(transactional_db, tenant_a, member_of, live_server):
    return build_team(tenant_a, member_of)


READERS = [
    ("dieter", "de", "Europe/Berlin", "lucia"),
    ("lucia", "es", "America/Mexico_City", "dieter"),
]


@pytest.mark.parametrize(("who", "lang", "zone", "other"), READERS)
def test_queue_draft_and_outbox_in_their_language_and_zone(
    chromium, live_server, team, who, lang, zone, other
):
    tenant, user, colleague = team["tenant"], team[who], team[other]
    held, intent = team["held"], team["intent"]
    # The browser asks for English and sits in UTC: the language and the zone are the person's.
    context = chromium.new_context(
        viewport={"width": 1280, "height": 900},
        base_url=live_server.url,
        locale="en-US",
        timezone_id="UTC",
    )
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        sign_in(page, user)
        presence_beat(tenant=tenant, draft_id=held.pk, user=colleague, mode="viewing")
        assert page.locator("html").get_attribute("lang") == lang

        # Queue: the held, escalated, overdue reply and the draft inside its deadline.
        page.goto(f"/t/{tenant.slug}/")
        row = page.locator("[data-row]", has=page.locator(f"a[href$='/drafts/{held.pk}/']"))
        assert row.locator("[data-sla=breached]").count() == 1
        assert row.locator("[data-escalated]").count() == 1
        waiting = row.locator("[data-waiting-since]").get_attribute("data-waiting-since")
        assert waiting == shown(held.created_at, lang, zone, "j M H:i")
        assert page.locator("[data-sla=ok]").count() == 1
        assert_no_english(page, lang, "queue")

        # Draft: the customer's message and the draft exactly as written, times in their zone.
        page.goto(f"/t/{tenant.slug}/drafts/{held.pk}/")
        page.wait_for_selector(f'[data-presence] [data-present="{colleague.email}"]')
        assert page.locator(".preview").inner_text() == CUSTOMER_TEXT
        assert page.locator("pre.body-text").inner_text() == DRAFT_TEXT
        assert page.locator("[data-received-at]").inner_text() == shown(
            team["received"], lang, zone, "j M H:i"
        )
        assert page.locator("[data-escalated-at]").inner_text() == shown(
            team["escalated_at"], lang, zone, "j M H:i"
        )
        note = page.locator(f"[data-note-id='{team['note'].pk}']")
        assert shown(team["note"].created_at, lang, zone, "j M H:i:s") in note.inner_text()
        assert note.locator(".note-text").inner_text() == "Lager sagt: heute verschickt."
        assert_no_english(page, lang, "draft")

        # Outbox: the approved send counting down its undo window, approved at their clock.
        page.goto(f"/t/{tenant.slug}/outbox/")
        assert page.locator("[data-undo] [data-countdown]").count() == 1
        assert page.locator("[data-approved-at]").inner_text() == shown(
            intent.approved_at, lang, zone, "j M H:i"
        )
        assert_no_english(page, lang, "outbox")

        # The send page of the same send: its approval time and journal in their zone too.
        page.goto(f"/t/{tenant.slug}/outbox/{intent.pk}/")
        assert page.locator("[data-approved-at]").inner_text() == shown(
            intent.approved_at, lang, zone, "j M Y H:i:s"
        )
        assert_no_english(page, lang, "send page")
    finally:
        context.close()


def test_the_two_readers_see_the_same_instant_on_different_clocks(team):
    """The check above is not satisfied by one shared clock: Berlin and Mexico City differ by
    seven hours (six during one week or so), so the expected strings differ."""
    berlin = shown(team["received"], "de", "Europe/Berlin", "H:i T")
    mexico = shown(team["received"], "es", "America/Mexico_City", "H:i T")
    assert berlin != mexico
    assert berlin.split()[-1] in {"CET", "CEST"}
