"""The HTML body of a draft version as the draft page frames it: its own document, of the version
the approve form names, under a policy that lets its CSS apply and runs nothing."""

import pytest
from django.urls import reverse
from django.utils import timezone

from intents.models import Draft, DraftPresence, DraftVersion, IntentEvent
from intents.services.content import MAX_BODY
from review.views.bodies import EMAIL_DOCUMENT_POLICY
from tenants.models import Membership

pytestmark = pytest.mark.django_db

HTML = "<style>p.x::after{content:' IBAN'}</style><p class=x style='color:#333'>Hello</p>"


def _frame_src(page: str) -> str:
    iframe = page.split('<iframe class="email-html"')[1].split(">")[0]
    assert " sandbox " in iframe and "srcdoc" not in iframe and "allow-" not in iframe
    return iframe.split('src="')[1].split('"')[0]


def test_the_frame_shows_the_version_on_the_page_as_stored_under_its_own_policy(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, html=HTML)
    client = signed_in(admin_a.user)

    src = _frame_src(client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode())
    document = client.get(src)

    assert src == reverse("draft_version_html", args=[tenant_a.slug, draft.pk, 1])
    assert document.status_code == 200
    assert document.content.decode() == DraftVersion.objects.get(draft=draft).html == HTML
    assert document["Content-Security-Policy"] == EMAIL_DOCUMENT_POLICY
    policy = dict(d.strip().split(" ", 1) for d in EMAIL_DOCUMENT_POLICY.split(";")[1:])
    assert policy["style-src"] == "'unsafe-inline'"
    assert policy["script-src"] == "'none'" and policy["default-src"] == "'none'"
    assert policy["img-src"] == "data:" and policy["frame-ancestors"] == "'self'"
    assert policy["font-src"] == "'none'"
    assert document["X-Frame-Options"] == "SAMEORIGIN"
    assert document["X-Content-Type-Options"] == "nosniff"


def test_another_tenants_or_a_missing_version_is_404_and_a_purged_body_410(
    tenant_a, tenant_b, mailbox_a, mailbox_b, make_draft, admin_a, signed_in
):
    ours = make_draft(mailbox_a, html=HTML)
    theirs = make_draft(mailbox_b, html=HTML)
    client = signed_in(admin_a.user)

    def get(draft, number):
        return client.get(reverse("draft_version_html", args=[tenant_a.slug, draft.pk, number]))

    assert get(theirs, 1).status_code == 404
    assert get(ours, 2).status_code == 404
    DraftVersion.objects.filter(draft=ours).update(body_purged_at=timezone.now())
    purged = get(ours, 1)
    assert purged.status_code == 410 and purged.content == b""


def test_its_iframe_tags_are_shown_as_text_and_nothing_else_changes(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    html = (
        '<p>a</p><iframe src="https://x.test/"></iframe><IFRAME\tsrc=//x.test><iFrAmE/src=//x.test>'
        "<iframe><iframed><b title='<iframe '>b</b><!-- <iframe\n-->"
    )
    draft = make_draft(mailbox_a, html=html)

    document = signed_in(admin_a.user).get(
        reverse("draft_version_html", args=[tenant_a.slug, draft.pk, 1])
    )

    assert document.content.decode() == (
        '<p>a</p>&lt;iframe src="https://x.test/"></iframe>&lt;IFRAME\tsrc=//x.test>'
        "&lt;iFrAmE/src=//x.test>&lt;iframe><iframed><b title='&lt;iframe '>b</b><!-- &lt;iframe\n-->"
    )
    assert DraftVersion.objects.get(draft=draft).html == html


def test_its_frame_tags_are_shown_as_text_and_its_frameset_kept(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """A frameset document's frames open a connection to their host, as an iframe does."""
    html = (
        "<frameset><frame src='https://x.test/'><FRAME\nsrc=//x.test><frame/src=//x.test><framed>"
    )
    draft = make_draft(mailbox_a, html=html)

    document = signed_in(admin_a.user).get(
        reverse("draft_version_html", args=[tenant_a.slug, draft.pk, 1])
    )

    assert document.content.decode() == (
        "<frameset>&lt;frame src='https://x.test/'>&lt;FRAME\nsrc=//x.test>&lt;frame/src=//x.test>"
        "<framed>"
    )


def _state(draft) -> tuple:
    """Everything a preview must leave as it was: the draft's row, its versions, the journal."""
    return (
        Draft.objects.filter(pk=draft.pk).values().get(),
        list(DraftVersion.objects.filter(draft=draft).values()),
        IntentEvent.objects.count(),
        DraftPresence.objects.count(),
    )


def test_the_editors_preview_is_the_frames_document_of_the_html_posted(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """The HTML as a save would store it (LF line endings, frame tags as text), under the frame's
    policy and headers; nothing is stored, claimed or journalled."""
    draft = make_draft(mailbox_a, html=HTML)
    client = signed_in(admin_a.user)
    stored = client.get(reverse("draft_version_html", args=[tenant_a.slug, draft.pk, 1]))
    before = _state(draft)

    preview = client.post(
        reverse("draft_html_preview", args=[tenant_a.slug, draft.pk]),
        {"html": "<style>p{color:red}</style>\r\n<p>Hi</p><iframe src=//x.test>"},
    )

    assert preview.status_code == 200
    assert preview.content.decode() == (
        "<style>p{color:red}</style>\n<p>Hi</p>&lt;iframe src=//x.test>"
    )
    headers = ("Content-Type", "Content-Security-Policy", "X-Frame-Options")
    headers += ("X-Content-Type-Options", "Cross-Origin-Resource-Policy", "Referrer-Policy")
    assert {h: preview[h] for h in headers} == {h: stored[h] for h in headers}
    assert "no-store" in preview["Cache-Control"]
    assert _state(draft) == before


def test_the_preview_refuses_whoever_may_not_edit_the_draft_and_changes_nothing(
    tenant_a, tenant_b, mailbox_a, mailbox_b, make_draft, admin_a, member_of, signed_in, client
):
    ours = make_draft(mailbox_a, html=HTML)
    theirs = make_draft(mailbox_b, html=HTML)
    viewer = member_of(tenant_a, "viewer")
    unrighted = member_of(tenant_a, "approver")
    Membership.objects.filter(pk=unrighted.pk).update(approve_all_mailboxes=False)
    before = (_state(ours), _state(theirs))

    def post(user, draft, slug=tenant_a.slug):
        client.logout()
        if user is not None:
            signed_in(user)
        return client.post(reverse("draft_html_preview", args=[slug, draft.pk]), {"html": "<p>x"})

    other_tenant = post(admin_a.user, theirs)
    by_slug = post(admin_a.user, theirs, slug=tenant_b.slug)
    by_viewer = post(viewer.user, ours)
    no_right = post(unrighted.user, ours)
    signed_out = post(None, ours)
    read = signed_in(admin_a.user).get(reverse("draft_html_preview", args=[tenant_a.slug, ours.pk]))

    assert other_tenant.status_code == 404
    assert by_slug.status_code in (403, 404)
    assert by_viewer.status_code == 403
    assert "Your role does not allow this." in by_viewer.content.decode()
    assert no_right.status_code == 403
    assert no_right["Content-Security-Policy"] == EMAIL_DOCUMENT_POLICY
    assert no_right.content.decode() == (
        f"You do not have the right to decide on drafts from {mailbox_a.address}. "
        "Ask a tenant admin for approve rights on this mailbox."
    )
    assert signed_out.status_code == 302 and "/signin/" in signed_out["Location"]
    assert read.status_code == 405
    assert (_state(ours), _state(theirs)) == before


def test_the_preview_refuses_html_a_save_refuses_in_its_words_and_changes_nothing(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, html=HTML)
    client = signed_in(admin_a.user)
    url = reverse("draft_html_preview", args=[tenant_a.slug, draft.pk])
    before = _state(draft)

    nul = client.post(url, {"html": "<p>a\x00b</p>"})
    huge = client.post(url, {"html": "a" * (MAX_BODY + 1)})
    # Line endings count as a save stores them: a body at the limit in CRLF is not too long.
    at_limit = client.post(url, {"html": "\r\n" * MAX_BODY})

    assert nul.status_code == 400 and nul.content.decode() == "Null characters are not allowed."
    assert huge.status_code == 400
    assert huge.content.decode() == "The html body is longer than 1000000 characters."
    assert (
        huge["Content-Security-Policy"] == nul["Content-Security-Policy"] == EMAIL_DOCUMENT_POLICY
    )
    assert nul["Content-Type"] == "text/plain; charset=utf-8"
    assert at_limit.status_code == 200 and at_limit.content == b"\n" * MAX_BODY
    assert _state(draft) == before


def test_the_preview_of_hostile_html_is_what_a_save_would_store(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """A lone surrogate cannot be sent as UTF-8: its bytes, hand-made, decode as U+FFFD, which is
    what a save of the same form stores. Deep nesting is the browser's to cut, as on the draft
    page: the server parses nothing of the HTML."""
    draft = make_draft(mailbox_a, html=HTML)
    client = signed_in(admin_a.user)
    url = reverse("draft_html_preview", args=[tenant_a.slug, draft.pk])
    before = _state(draft)
    deep = "<div>" * 80_000 + "deep" + "</div>" * 80_000

    surrogate = client.post(
        url, "html=%3Cp%3E%ED%A0%80%3C%2Fp%3E", content_type="application/x-www-form-urlencoded"
    )
    nested = client.post(url, {"html": deep})

    assert surrogate.status_code == 200
    assert surrogate.content.decode() == "<p>\ufffd\ufffd\ufffd</p>"
    assert nested.status_code == 200 and nested.content.decode() == deep
    assert _state(draft) == before


FONT = "{font-family:X;src:url(data:font/ttf;base64,AAEAAA==)}.n{font-family:X}"


# Each a spelling Chromium applies as an @font-face rule; the frame's policy refuses the font
# whatever its spelling (font-src 'none', tests/review/test_browser_embedded_fonts.py).
@pytest.mark.parametrize(
    "html",
    [
        f"<style>@font-face{FONT}</style><p class=n>DE11</p>",
        f"<style>@FONT-FACE{FONT}</style><p class=n>DE11</p>",
        f"<style>@\\66 ont-face{FONT}</style><p class=n>DE11</p>",
        f"<style>@font-f\\41 CE{FONT}</style><p class=n>DE11</p>",
        f"<svg><style>&#64;&#92;66 ont-face{FONT}</style></svg><p class=n>DE11</p>",
    ],
)
def test_the_draft_page_says_when_the_html_brings_fonts_of_its_own(
    html, tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, html=html)

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    assert page.content.decode().count('data-body-warning="embedded_fonts"') == 1


def test_no_font_warning_for_html_that_brings_no_fonts(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, html="<style>p{font-family:serif}</style><p>font face</p>")

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    assert b"data-body-warning" not in page.content


# Each loads a stylesheet from elsewhere, which the frame never fetches (default-src 'none') and a
# mail client that does (Apple Mail, Outlook with remote content allowed) applies: fonts, hidden
# text, added text; and the file at that address may change after the approval.
@pytest.mark.parametrize(
    "html",
    [
        '<link rel="stylesheet" href="https://cdn.example/mail.css"><p>Hello</p>',
        "<LINK REL=STYLESHEET HREF=//cdn.example/mail.css><p>Hello</p>",
        '<link href="https://cdn.example/a.css" rel="alternate stylesheet"><p>Hello</p>',
        '<link rel="&#115;tylesheet" href="https://cdn.example/mail.css"><p>Hello</p>',
        '<style>@import url("https://cdn.example/mail.css");</style><p>Hello</p>',
        "<style>@IMPORT 'https://cdn.example/mail.css';</style><p>Hello</p>",
        "<style>@\\69 mport 'https://cdn.example/mail.css';</style><p>Hello</p>",
    ],
)
def test_the_draft_page_says_when_the_html_loads_styles_from_elsewhere(
    html, tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, html=html)

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    assert page.content.decode().count('data-body-warning="remote_styles"') == 1


def test_no_remote_styles_warning_for_html_whose_styles_are_its_own(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(
        mailbox_a,
        html='<style>p{color:red}</style><p>We import goods; see <a href="https://x.example/'
        'style.css">the link stylesheet</a>.</p>',
    )

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    assert b'data-body-warning="remote_styles"' not in page.content


@pytest.mark.parametrize(
    "html",
    [
        '<p>Hello</p><img src="https://img.example/iban.png" alt="">',
        "<IMG SRC=//img.example/iban.png>",
        '<img srcset="https://img.example/iban.png 2x" src="data:,">',
        '<picture><source srcset="http://img.example/a.png"><img src="data:,"></picture>',
        '<table background="https://img.example/bg.png"><tr><td>Hi</td></tr></table>',
        "<div style=\"background:url('https://img.example/bg.png')\">Hi</div>",
        "<style>p{background-image:url(//img.example/bg.png)}</style><p>Hi</p>",
        '<svg><image href="https://img.example/a.png"/></svg>',
        '<video poster="https://img.example/a.png"></video>',
        '<img src="&#104;ttps://img.example/iban.png">',
    ],
)
def test_the_draft_page_says_when_the_html_shows_images_from_elsewhere(
    html, tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """The frame loads no remote image (its policy: ``img-src data:``), so the reviewer saw an
    empty box where a mail client that loads images shows the customer whatever picture that
    address serves: words of its own ("pay to IBAN ..."), changed at will after the approval."""
    draft = make_draft(mailbox_a, html=html)

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    assert page.content.decode().count('data-body-warning="remote_images"') == 1


def test_no_remote_images_warning_for_html_whose_images_are_its_own(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(
        mailbox_a,
        html='<img src="data:image/png;base64,iVBORw0KGgo=" alt="logo"><img src="cid:logo">'
        '<p>See <a href="https://x.example/a.png">our src="https://x.example" page</a>.</p>',
    )

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    assert b'data-body-warning="remote_images"' not in page.content


# A sentence only a phone reader sees (hidden above 600 px, the reviewer's width), and one only
# a reader in dark mode sees.
PHONE_ONLY = (
    "<style>.m{display:none} @media (max-width: 600px){.m{display:block}}</style>"
    "<p>Your refund is on its way.</p><p class=m>Reply with your card number.</p>"
)
DARK_ONLY = (
    "<style>.d{display:none} @media (prefers-color-scheme: dark){.d{display:block}}</style>"
    "<p>Your refund is on its way.</p><p class=d>Pay to IBAN XX00 1234 instead.</p>"
)


def test_the_draft_page_says_whose_look_the_html_changes_before_approve(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """The frame showed the reviewer one look (their window's width, their browser's colour
    scheme) and they approved a sentence only phone readers, or only dark-mode readers, see.
    The page names those readers beside the body and before Approve (only to check), offers the
    frame at a phone's width, and says that dark mode it cannot show."""
    draft = make_draft(mailbox_a, html=PHONE_ONLY + DARK_ONLY)
    client = signed_in(admin_a.user)
    url = reverse("draft", args=[tenant_a.slug, draft.pk])

    page = client.get(url).content.decode()
    phone = client.get(url, {"look": "phone"}).content.decode()

    warning = page.split('data-body-warning="reader_looks"')[1].split("</div>")[0]
    assert "phone-width screens, dark mode and inbox previews" in warning
    assert 'href="?look=phone#message-html"' in warning
    assert 'data-look-note="dark_mode"' in warning
    decision = page.split("data-approve-form")[1].split("data-approve ")[0]
    assert "data-looks-to-check" in decision
    assert "(phone-width screens, dark mode and inbox previews" in decision
    assert 'class="email-html"' in page
    assert 'class="email-html phone-width"' in phone
    assert "data-look-shown" in phone


def test_no_reader_looks_warning_for_html_that_shows_every_reader_the_same(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, html="<style>p{color:#333}</style><p class=x>Hello</p>")
    client = signed_in(admin_a.user)
    url = reverse("draft", args=[tenant_a.slug, draft.pk])

    page = client.get(url).content.decode()
    phone = client.get(url, {"look": "phone"}).content.decode()

    assert 'data-body-warning="reader_looks"' not in page
    assert "data-looks-to-check" not in page
    assert 'class="email-html"' in phone
