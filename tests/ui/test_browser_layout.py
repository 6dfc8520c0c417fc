"""Layout in headless Chromium: on every staff page, in German (the longest words) at 390 and
1280 px, nothing is cut off unseen and nothing leaves its card or the page; the short labels of
the top bar stay on one line in every language.

Found by looking at screenshots, then made a check: a key-value list whose values were pushed out
of the broadcast page's progress card (tests/ui/test_browser_broadcast_page.py), and the top bar on
a phone, where "Sign out" and "Cerrar sesión" broke onto two lines beside a tenant name that did too.

What counts as broken (LAYOUT_PROBLEMS, run in the page):
- the page scrolls sideways;
- an element that hides its overflow holds more than it shows, unless it says so with an
  ellipsis (the queue's subjects and recipients are cut on purpose) or is a form field (a long
  address scrolls inside its input);
- an element reaches past the right edge of its card, table cell, list item or the page, with no
  scrolling box between them (a wide table scrolls in its .table-wrap);
- a button, tab or top bar link breaks its label over two lines although the line it is on
  has room for all of it (a label longer than its card may wrap);
- a button sits at the end of the last line of the help text before it;
- a list in a coloured box has its bullets outside the box;
- a closed select is narrower than the choice it shows.
"""

import pytest
from django.contrib.auth import get_user_model

from intents import services
from intents.attachments import Upload
from intents.models import SendIntent, Suppression
from intents.sending.claim import intent_claim
from intents.sending.fanout import broadcast_run
from intents.sending.precheck import intent_begin_attempts
from intents.services.broadcasts import broadcast_approve, broadcast_create
from mailboxes.models import Mailbox
from tests.browser import BROWSER_MARKS, sign_in
from tests.review.test_browser_attachments import invoice_pdf, label_png
from tests.ui.test_browser_accessibility import STAFF_PAGES
from tests.ui.test_browser_accessibility import scene as accessibility_scene  # noqa: F401 (a fixture)

pytestmark = BROWSER_MARKS

# Pages of the scene beyond STAFF_PAGES: a broadcast in review and one sending, a draft with
# files and recipients to check, its editor, and sends in other states.
MORE_PAGES = [
    ("broadcast in review", "/t/{slug}/broadcasts/{broadcast_review}/"),
    ("broadcast sending", "/t/{slug}/broadcasts/{broadcast_sending}/"),
    ("draft with files and warnings", "/t/{slug}/drafts/{files}/"),
    ("edit with files", "/t/{slug}/drafts/{files}/edit/"),
    ("held send", "/t/{slug}/outbox/{held}/"),
    ("failed send", "/t/{slug}/outbox/{failed}/"),
    ("blocked send of a broadcast", "/t/{slug}/outbox/{broadcast_send}/"),
    ("draft with hidden text, links and invisible characters", "/t/{slug}/drafts/{looks}/"),
]

LAYOUT_PROBLEMS = r"""() => {
  const width = document.documentElement.clientWidth;
  const found = [];
  const describe = (el) => {
    const parts = [];
    for (let e = el; e && e !== document.body && parts.length < 3; e = e.parentElement) {
      let s = e.tagName.toLowerCase();
      if (e.classList.length) s += '.' + [...e.classList].join('.');
      const data = [...e.attributes].find((a) => a.name.startsWith('data-'));
      if (data) s += `[${data.name}]`;
      parts.unshift(s);
    }
    return parts.join(' > ') + ` "${(el.innerText || el.value || '').replace(/\s+/g, ' ').trim().slice(0, 50)}"`;
  };
  const shown = (el) => {
    const style = getComputedStyle(el);
    if (style.display === 'none' || style.visibility === 'hidden') return false;
    if (el.closest('dialog:not([open]), details:not([open]) > :not(summary)')) return false;
    const box = el.getBoundingClientRect();
    return box.width > 1 && box.height > 1;
  };
  const hides = (style) => ['hidden', 'clip'].includes(style.overflowX);
  if (document.documentElement.scrollWidth > width + 1)
    found.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} px in ${width}`);
  const FRAMES = '.card, .stat, td, th, li, dd, main';
  for (const el of document.body.querySelectorAll('*')) {
    if (!shown(el)) continue;
    const style = getComputedStyle(el);
    const field = el.matches('input, textarea, select');
    if (!field && style.textOverflow !== 'ellipsis') {
      if (hides(style) && el.scrollWidth > el.clientWidth + 1)
        found.push(`cut off on the right: ${describe(el)}`);
      if (['hidden', 'clip'].includes(style.overflowY) && el.scrollHeight > el.clientHeight + 1)
        found.push(`cut off at the bottom: ${describe(el)}`);
    }
    if (['absolute', 'fixed'].includes(style.position)) continue;
    const box = el.getBoundingClientRect();
    let frame = null;
    let scrolls = false;
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (getComputedStyle(p).overflowX !== 'visible') { scrolls = true; break; }
      if (p.matches(FRAMES)) { frame = p; break; }
    }
    if (scrolls) continue;
    const edge = frame ? frame.getBoundingClientRect().right : width;
    if (box.right > edge + 1 && !(frame && el.parentElement !== frame && el.parentElement.getBoundingClientRect().right > edge + 1))
      found.push(`reaches ${Math.round(box.right - edge)} px past ${frame ? describe(frame).split(' "')[0] : 'the page'}: ${describe(el)}`);
  }
  for (const el of document.querySelectorAll('button, .button, .tabs a, .subnav a, .topbar a, .topbar summary, .topbar button')) {
    if (!shown(el)) continue;
    const style = getComputedStyle(el);
    const line = parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.2;
    const inner = el.getBoundingClientRect().height - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom)
      - parseFloat(style.borderTopWidth) - parseFloat(style.borderBottomWidth);
    if (inner <= line * 1.6) continue;
    // A label longer than the line it has may wrap; one that would fit there was squeezed.
    let holder = el.parentElement;
    while (['inline', 'contents'].includes(getComputedStyle(holder).display)) holder = holder.parentElement;
    const room = holder.clientWidth - parseFloat(getComputedStyle(holder).paddingLeft)
      - parseFloat(getComputedStyle(holder).paddingRight);
    const wrap = el.style.whiteSpace;
    el.style.whiteSpace = 'nowrap';
    const natural = el.getBoundingClientRect().width;
    el.style.whiteSpace = wrap;
    if (natural <= room) found.push(`label squeezed onto ${Math.round(inner / line)} lines: ${describe(el)}`);
  }
  const pen = document.createElement('canvas').getContext('2d');
  for (const select of document.querySelectorAll('select')) {
    if (!shown(select) || select.multiple || select.size > 1 || select.selectedIndex < 0) continue;
    const style = getComputedStyle(select);
    pen.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    // The chosen option's text, the padding and Chromium's arrow (about 20 px).
    const needs = pen.measureText(select.options[select.selectedIndex].text).width
      + parseFloat(style.paddingLeft) + parseFloat(style.paddingRight) + 20;
    if (needs > select.clientWidth + 1)
      found.push(`a select cuts off its choice (${Math.round(needs)} px in ${select.clientWidth}): ${describe(select)} ${select.options[select.selectedIndex].text}`);
  }
  for (const list of document.querySelectorAll('ul, ol')) {
    const style = getComputedStyle(list);
    if (!shown(list) || style.backgroundColor === 'rgba(0, 0, 0, 0)' || style.listStyleType === 'none') continue;
    if (style.listStylePosition === 'outside' && parseFloat(style.paddingLeft) < parseFloat(style.fontSize))
      found.push(`the bullets hang outside their box: ${describe(list)}`);
  }
  for (const el of document.querySelectorAll('button, .button')) {
    const help = el.previousElementSibling;
    if (!shown(el) || !help || !help.matches('small') || getComputedStyle(help).display !== 'inline') continue;
    const lines = help.getClientRects();
    const last = lines[lines.length - 1];
    const box = el.getBoundingClientRect();
    if (last && last.bottom > box.top + 2 && last.top < box.bottom - 2)
      found.push(`a button continues a line of help text: ${describe(el)}`);
  }
  return found;
}"""


@pytest.fixture
def layout_scene(request, tenant_a):
    """The accessibility scene, plus what the more crowded pages show."""
    base = request.getfixturevalue("accessibility_scene")
    admin, ids = base["admin"].user, dict(base["ids"])
    mailbox = Mailbox.objects.get(pk=ids["mailbox"])
    review = broadcast_create(
        tenant=tenant_a,
        mailbox=mailbox,
        name="Lagerausfall Hauptverteilzentrum Nordrhein-Westfalen",
        subject="Ihre Bestellung {{ order }} verzögert sich",
        text="Hallo {{ name }},\n\nIhre Bestellung {{ order }} wird nächste Woche verschickt.",
        # What the broadcast page names as the draft page does: hidden text, a link leading
        # elsewhere (a long target), a conditional comment, a look-alike domain.
        html=(
            '<div style="display:none">Antworten Sie mit Ihrer Kartennummer.</div>'
            "<p>Hallo {{ name }}, Ihre Bestellung {{ order }} kommt bald: https://b\u0430nk.example</p>"
            '<p><a href="https://rechnungskorrektur.example-payments.test/kunden/bestaetigung/'
            '1042?token=abcdefghijklmnopqrstuvwxyz0123456789">https://bank.example/zahlung</a></p>'
            "<!--[if mso]><p>Nur in Outlook</p><![endif]-->"
        ),
        recipients=[
            {"address": f"kunde{i}@example.com", "variables": {"name": "Kim", "order": f"A{i}"}}
            for i in range(4)
        ],
    )
    sending = broadcast_create(
        tenant=tenant_a,
        mailbox=mailbox,
        name="Warehouse outage",
        subject="Order {{ order }}",
        text="Hello {{ name }}",
        recipients=[
            {"address": f"customer{i}@example.com", "variables": {"name": "Ana", "order": i}}
            for i in range(3)
        ],
    )
    broadcast_approve(
        tenant=tenant_a, broadcast_id=sending.pk, content_hash=sending.content_hash, actor=admin
    )
    broadcast_run(sending.pk)
    Suppression.objects.create(tenant=tenant_a, address="customer0@example.com", reason="manual")
    intent_begin_attempts(intent_claim(worker="t", limit=1))
    files = services.draft_create(
        tenant=tenant_a,
        mailbox=mailbox,
        to=["maria.lopez@example.com", "kunde9@example.com"],
        cc=["someone.with.a.really.long.address.name@subdomain.example-company.test"],
        subject="Ihre Rücksendeetikettenbestätigung und Rechnungskorrekturmitteilung",
        text="Hallo,\n\nDonaudampfschifffahrtsgesellschaftskapitänsmütze.\n\nGrüße",
        attachments=[
            Upload("label-1042.png", "image/png", label_png()),
            Upload(
                "rechnungskorrektur-1042-endgueltige-fassung.pdf", "application/pdf", invoice_pdf()
            ),
        ],
        actor_user=admin,
    )
    Suppression.objects.create(tenant=tenant_a, address="kunde9@example.com", reason="bounced")
    # Every note the draft page has for what a reader sees otherwise (a look-alike domain too),
    # with long words and a
    # long link target, the things most likely to spill out of a phone's width.
    looks = services.draft_create(
        tenant=tenant_a,
        mailbox=mailbox,
        to=["maria.lopez@example.com"],
        subject="Ihre Erstattung von $\u202e001 Rechnungskorrekturmitteilung",
        text="Hallo,\n\nIhre Erstattung ist unterwegs: https://b\u0430nk.example/zahlung\u200b\n\nGrüße",
        html=(
            '<div style="display:none">Antworten Sie mit Ihrer Kartennummer.</div>'
            "<p>Ihre Erstattung ist unterwegs.</p>"
            '<p><a href="https://rechnungskorrektur.example-payments.test/kunden/bestaetigung/'
            '1042?token=abcdefghijklmnopqrstuvwxyz0123456789">https://bank.example/zahlung</a></p>'
            "<style>.x::after{content:'Donaudampfschifffahrtsgesellschaft'}</style>"
            "<!--[if mso]><p>Nur in Outlook</p><![endif]-->"
            '<p class="x"><img src="https://cdn.example.com/logo.png" alt=""></p>'
        ),
        actor_user=admin,
    )
    sends = SendIntent.objects.filter(tenant=tenant_a)
    ids.update(
        broadcast_review=review.pk,
        broadcast_sending=sending.pk,
        files=files.pk,
        looks=looks.pk,
        held=sends.filter(state="queued").exclude(held_reason="").first().pk,
        failed=sends.filter(state="failed").first().pk,
        broadcast_send=sends.filter(broadcast=sending, state="blocked").get().pk,
    )
    return {"admin": admin, "ids": ids}


def _speak(user, language):
    get_user_model().objects.filter(pk=user.pk).update(language=language)


def test_no_staff_page_in_german_cuts_off_or_spills_anything(page, layout_scene):
    """Each page is loaded once and measured at a phone's width and a desktop's: the pages'
    layout follows CSS media queries only (no script listens for a resize)."""
    admin, ids = layout_scene["admin"], layout_scene["ids"]
    _speak(admin, "de")
    sign_in(page, admin)
    found = {}
    for name, path in STAFF_PAGES + MORE_PAGES:
        page.set_viewport_size({"width": 1280, "height": 900})
        response = page.goto(path.format(**ids))
        assert response is not None and response.status == 200, name
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            found[f"{name} at {width} px"] = page.evaluate(LAYOUT_PROBLEMS)
    broken = {name: problems for name, problems in found.items() if problems}
    assert not broken, "\n".join(f"{name}: {p}" for name, ps in broken.items() for p in ps)


@pytest.mark.parametrize("language", ["en", "de", "es"])
def test_the_top_bar_on_a_phone_keeps_each_label_on_one_line(page, layout_scene, language):
    admin, ids = layout_scene["admin"], layout_scene["ids"]
    _speak(admin, language)
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, admin)
    page.goto(f"/t/{ids['slug']}/")

    assert page.evaluate(LAYOUT_PROBLEMS) == []


def test_a_long_sso_redirect_uri_wraps_inside_its_card_on_a_phone(
    chromium, live_server, layout_scene, settings
):
    """The URI an admin copies into their identity provider is built from the site's own host: a
    real one is longer than the test server's, and ran out of the card and off a phone's screen."""
    host = "countersign.kundenservice.beispiel-unternehmen.localhost"
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, host]
    port = live_server.url.rsplit(":", 1)[1]
    context = chromium.new_context(
        viewport={"width": 390, "height": 844}, base_url=f"http://{host}:{port}"
    )
    page = context.new_page()
    try:
        sign_in(page, layout_scene["admin"])
        page.goto(f"/t/{layout_scene['ids']['slug']}/admin/sign-in/")

        assert page.inner_text("#redirect-uri") == f"http://{host}:{port}/sso/callback/"
        assert page.evaluate(LAYOUT_PROBLEMS) == []
    finally:
        context.close()


def test_the_audit_log_on_a_phone_keeps_each_date_whole(page, layout_scene):
    """Found in a screenshot: at 390 px the "When" column was as narrow as "19:29:00", so every
    date broke at its hyphens, "2026-12-" over "06", four lines a row."""
    admin, ids = layout_scene["admin"], layout_scene["ids"]
    _speak(admin, "de")
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, admin)
    page.goto(f"/t/{ids['slug']}/admin/audit/")

    lines_per_date = page.evaluate(
        """() => [...document.querySelectorAll('table.audit time')].map((t) => {
            const range = document.createRange();
            range.setStart(t.firstChild, 0);
            range.setEnd(t.firstChild, 10);
            return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
        })"""
    )
    assert len(lines_per_date) > 5
    assert set(lines_per_date) == {1}


def test_the_bad_rows_of_a_broadcast_upload_read_inside_their_box(page, layout_scene):
    """Found in a screenshot: the list of bad recipient rows is an error box whose padding left
    no room for the bullets, which hung outside it, on the card's edge."""
    admin, ids = layout_scene["admin"], layout_scene["ids"]
    _speak(admin, "de")
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, admin)
    page.goto(f"/t/{ids['slug']}/broadcasts/new/")
    page.select_option("select[name=mailbox]", str(ids["mailbox"]))
    page.fill("input[name=subject]", "Ihre Bestellung {{ order }} verzögert sich")
    page.fill("textarea[name=text]", "Hallo {{ name }}, Ihre Bestellung {{ order }} kommt später.")
    bad = (
        "address,name,order\nnot-an-address,Kim,A1\nlee@example.com,Lee,A2\nLEE@example.com,Bo,A3\n"
    )
    page.set_input_files(
        "input[name=recipients]",
        files=[{"name": "kunden.csv", "mimeType": "text/csv", "buffer": bad.encode()}],
    )
    page.click("[data-post-broadcast]")
    page.wait_for_selector("[data-bad-rows]")

    assert page.locator("[data-bad-row]").count() == 2
    assert page.evaluate(LAYOUT_PROBLEMS) == []
