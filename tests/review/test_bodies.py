"""The HTML body of a draft version as the draft page frames it: its own document, of the version
the approve form names, under a policy that lets its CSS apply and runs nothing."""

import pytest
from django.urls import reverse
from django.utils import timezone

from intents.models import DraftVersion
from review.views.bodies import EMAIL_DOCUMENT_POLICY

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
