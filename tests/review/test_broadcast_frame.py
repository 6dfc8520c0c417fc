"""A broadcast's page shows its sample recipient's HTML drawn, as a draft's page shows a draft's:
the same sandboxed frame, served by the same code under the same policy, of the message the
page's approve button carries (the sample recipient's values filled in). Before, the page showed
only the source, and a reviewer approving a message to thousands read markup, not the message."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from intents.models import Broadcast
from intents.selectors.broadcasts import broadcast_sample
from intents.services.broadcasts import broadcast_create, broadcast_replace_recipients
from review.views.bodies import EMAIL_DOCUMENT_POLICY
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db

HTML = (
    "<style>p.x::after{content:' IBAN'}</style>"
    "<p class=x style='color:#333'>Hello {{ name }}</p><iframe src=https://x.test/></iframe>"
)


def _broadcast(tenant, html=HTML):
    return broadcast_create(
        tenant=tenant,
        mailbox=make_local_mailbox(tenant),
        subject="Order {{ name }}",
        text="Hello {{ name }}",
        html=html,
        recipients=[
            {"address": "ann@example.com", "variables": {"name": "Ann <b>&</b>"}},
            {"address": "bob@example.com", "variables": {"name": "Bob"}},
        ],
    )


def _frame(page: str) -> tuple[str, str]:
    """The frame's tag and its src, unescaped."""
    iframe = page.split('<iframe class="email-html')[1].split(">")[0]
    return iframe, iframe.split('src="')[1].split('"')[0].replace("&amp;", "&")


def test_the_page_frames_the_sample_recipients_message_under_the_drafts_policy(
    tenant_a, signed_in, member_of
):
    broadcast = _broadcast(tenant_a)
    client = signed_in(member_of(tenant_a, "approver").user)

    page = client.get(reverse("broadcast", args=[tenant_a.slug, broadcast.pk])).content.decode()
    iframe, src = _frame(page)
    document = client.get(src)

    assert " sandbox " in iframe and "srcdoc" not in iframe and "allow-" not in iframe
    assert 'referrerpolicy="no-referrer"' in iframe
    assert src.startswith(reverse("broadcast_sample_html", args=[tenant_a.slug, broadcast.pk]))
    assert document.status_code == 200
    assert document.content.decode() == (
        "<style>p.x::after{content:' IBAN'}</style>"
        "<p class=x style='color:#333'>Hello Ann &lt;b&gt;&amp;&lt;/b&gt;</p>"
        "&lt;iframe src=https://x.test/></iframe>"
    )
    assert broadcast_sample(broadcast, 0)["html"].replace("<iframe", "&lt;iframe") == (
        document.content.decode()
    )
    assert document["Content-Security-Policy"] == EMAIL_DOCUMENT_POLICY
    assert document["X-Frame-Options"] == "SAMEORIGIN"
    assert document["X-Content-Type-Options"] == "nosniff"
    assert document["Cache-Control"].startswith("max-age=0")
    assert "no-store" in document["Cache-Control"]
    # The source stays on the page, folded away.
    assert "<details" in page.split('id="message-html"')[1]
    assert "Hello Ann &amp;lt;b&amp;gt;" in page


def test_another_recipients_page_frames_that_recipients_message(tenant_a, signed_in, member_of):
    broadcast = _broadcast(tenant_a)
    client = signed_in(member_of(tenant_a, "viewer").user)

    page = client.get(
        reverse("broadcast", args=[tenant_a.slug, broadcast.pk]) + "?sample=1"
    ).content.decode()
    document = client.get(_frame(page)[1])

    assert document.status_code == 200
    assert "Hello Bob" in document.content.decode()


def test_another_tenants_broadcast_answers_like_a_missing_one(
    tenant_a, tenant_b, signed_in, member_of
):
    theirs = _broadcast(tenant_b)
    client = signed_in(member_of(tenant_a, "admin").user)

    def get(broadcast_id):
        return client.get(reverse("broadcast_sample_html", args=[tenant_a.slug, broadcast_id]))

    foreign, missing = get(theirs.pk), get(987654321)

    assert foreign.status_code == missing.status_code == 404
    assert b"Hello" not in foreign.content


def test_a_frame_of_a_hash_the_broadcast_no_longer_holds_shows_no_message(
    tenant_a, signed_in, member_of
):
    """The page was read, then the recipients were replaced: its frame, loaded after, must not
    draw the new list's message above the old hash's approve button."""
    broadcast = _broadcast(tenant_a)
    client = signed_in(member_of(tenant_a, "approver").user)
    page = client.get(reverse("broadcast", args=[tenant_a.slug, broadcast.pk])).content.decode()
    broadcast_replace_recipients(
        tenant=tenant_a,
        broadcast_id=broadcast.pk,
        recipients=[{"address": "eve@example.com", "variables": {"name": "Eve"}}],
    )

    document = client.get(_frame(page)[1])

    assert document.status_code == 409
    assert b"Eve" not in document.content and b"Ann" not in document.content
    assert document["Content-Security-Policy"] == EMAIL_DOCUMENT_POLICY


def test_a_purged_body_answers_410_and_nothing(tenant_a, signed_in, member_of):
    broadcast = _broadcast(tenant_a)
    Broadcast.objects.filter(pk=broadcast.pk).update(body_purged_at=timezone.now())

    document = signed_in(member_of(tenant_a, "approver").user).get(
        reverse("broadcast_sample_html", args=[tenant_a.slug, broadcast.pk])
    )

    assert document.status_code == 410 and document.content == b""


def test_the_reader_looks_note_speaks_of_the_frame_and_its_phone_look_keeps_the_recipient(
    tenant_a, signed_in, member_of
):
    broadcast = _broadcast(
        tenant_a,
        html="<style>@media (max-width:600px){.w{display:none} }</style>"
        "<p class=w>Hello {{ name }}</p>",
    )
    client = signed_in(member_of(tenant_a, "approver").user)
    base = reverse("broadcast", args=[tenant_a.slug, broadcast.pk])

    page = client.get(base + "?sample=1").content.decode()
    phone = client.get(base + "?sample=1&look=phone").content.decode()

    assert "The frame below shows it one way" in page
    assert 'href="?sample=1&amp;look=phone#message-html"' in page
    assert 'class="email-html phone-width"' in phone
    assert 'href="?sample=1#message-html" data-look="window"' in phone
    assert "Hello Bob" in client.get(_frame(phone)[1]).content.decode()
