"""Fixes a reviewer asked for on the review pages (issue 16)."""

import pytest
from django.urls import reverse
from django.utils import timezone

from intents import services
from tenants.models import AuditEvent
from tests.pages import based_on
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db


def _notes(client, tenant, draft):
    return client.get(reverse("draft", args=[tenant.slug, draft.pk])).content.decode()


def test_no_recipient_is_external_while_the_tenant_names_no_domain(
    tenant_a, mailbox_a, admin_a, make_draft, signed_in
):
    draft = make_draft(mailbox_a, to=["maria@customer.test"])
    page = _notes(signed_in(admin_a.user), tenant_a, draft)
    assert 'data-note="external"' not in page


def test_external_means_outside_the_tenants_own_domains_not_the_mailboxs(
    tenant_a, mailbox_a, admin_a, make_draft, signed_in
):
    tenant_a.own_domains = ["acme.test"]
    tenant_a.save(update_fields=["own_domains"])
    draft = make_draft(
        mailbox_a, to=["maria@customer.test"], cc=["ops@acme.test", "eu@support.acme.test"]
    )
    page = _notes(signed_in(admin_a.user), tenant_a, draft)
    external = page.split('data-note="external"')
    assert len(external) == 2
    assert "customer.test" in external[1].split("</span>")[0]


def test_an_admin_sets_the_own_domains_with_validation(tenant_a, admin_a, signed_in):
    client = signed_in(admin_a.user)
    url = reverse("admin_own_domains", args=[tenant_a.slug])
    base = based_on(client, reverse("admin_policies", args=[tenant_a.slug]), "domains_form")

    bad = client.post(url, {"own_domains": "acme.test\nnot a domain@", "based_on": base})
    tenant_a.refresh_from_db()
    assert bad.status_code == 400
    assert "is not a domain name" in bad.content.decode()
    assert tenant_a.own_domains == []

    good = client.post(
        url, {"own_domains": "Acme.test, @support.acme.test\nacme.test", "based_on": base}
    )
    tenant_a.refresh_from_db()
    assert good.status_code == 302
    assert tenant_a.own_domains == ["acme.test", "support.acme.test"]
    assert AuditEvent.objects.filter(tenant=tenant_a, action="tenant.policies_changed").exists()
    page = client.get(reverse("admin_policies", args=[tenant_a.slug])).content.decode()
    assert "support.acme.test" in page


def test_a_non_admin_cannot_set_the_own_domains(tenant_a, member_of, signed_in):
    client = signed_in(member_of(tenant_a, "approver").user)
    response = client.post(
        reverse("admin_own_domains", args=[tenant_a.slug]), {"own_domains": "x.test"}
    )
    tenant_a.refresh_from_db()
    assert response.status_code == 403
    assert tenant_a.own_domains == []


DETAIL = "503 from AgentMail after the request was written"


@pytest.mark.parametrize("page", ["attention", "outbox_intent"])
def test_the_needs_attention_error_is_shown_once(
    tenant_a, mailbox_a, admin_a, make_intent, signed_in, page
):
    intent = make_intent(
        mailbox_a,
        state="needs_attention",
        attempts=1,
        last_error_code="server_error",
        last_error_detail=DETAIL,
    )
    args = [tenant_a.slug] + ([intent.pk] if page == "outbox_intent" else [])
    html = signed_in(admin_a.user).get(reverse(page, args=args)).content.decode()
    assert html.count(DETAIL) == 1
    assert "data-error-above" in html


def test_the_stale_draft_notice_is_said_once(tenant_a, mailbox_a, make_draft, admin_a, signed_in):
    draft = make_draft(mailbox_a)
    seen = draft.versions.get()
    services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        base_version=1,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text="Changed.",
        html="",
        actor_user=admin_a.user,
    )
    client = signed_in(admin_a.user)
    url = reverse("draft_approve", args=[tenant_a.slug, draft.pk])
    data = {"version": seen.number, "content_hash": seen.content_hash}
    for headers in ({}, {"HX-Request": "true"}):
        body = client.post(url, data, headers=headers).content.decode().lower()
        assert body.count("changed since you opened it") == 1, headers


HOSTILE_HTML = (
    '<p>Hello</p><script>parent.document.title="pwned"</script>'
    '<img src=x onerror="parent.document.title=\'pwned\'"><form action="https://evil.test"></form>'
)


def test_the_editor_keeps_the_customers_message_and_a_sandboxed_preview(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    InboundMessage.objects.create(
        tenant=tenant_a,
        mailbox=mailbox_a,
        thread_id="thr-7",
        message_id="<q7@mail.test>",
        sender="Maria <maria@customer.test>",
        subject="Broken blender",
        preview="The blender arrived broken, can I get a refund?",
        received_at=timezone.now(),
    )
    draft = make_draft(
        mailbox_a,
        to=["maria@customer.test"],
        subject=None,
        in_reply_to="<q7@mail.test>",
        html=HOSTILE_HTML,
    )
    html = (
        signed_in(admin_a.user)
        .get(reverse("draft_edit", args=[tenant_a.slug, draft.pk]))
        .content.decode()
    )
    customer = html.split("data-customer-message")[1]
    assert "The blender arrived broken, can I get a refund?" in customer
    iframe = html.split("<iframe")[1].split(">")[0]
    assert " sandbox " in iframe and "allow-" not in iframe
    # The version's own document (tests/review/test_bodies.py), not a srcdoc under this page's
    # policy; as the person types, the same document of what they typed (draft_html_preview).
    version_html = reverse("draft_version_html", args=[tenant_a.slug, draft.pk, 1])
    assert f'src="{version_html}"' in iframe and "srcdoc" not in iframe
    preview = reverse("draft_html_preview", args=[tenant_a.slug, draft.pk])
    assert f'data-preview-url="{preview}"' in html
    assert "<script>parent" not in html


def test_a_decided_draft_shows_no_empty_decision_card(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a)
    version = draft.versions.get(number=draft.current_version)
    services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=version.number,
        content_hash=version.content_hash,
        actor=admin_a.user,
    )
    html = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk])).content
    assert b'id="decision" hidden>' in html


def test_own_domains_that_fit_their_box_are_taken_though_the_browser_posts_crlf(
    tenant_a, admin_a, signed_in
):
    """The box's maxlength (5000) counts a line break as one character and the browser posts it
    as CRLF: 50 long domains a line each fit the box and were refused as too long."""
    client = signed_in(admin_a.user)
    base = based_on(client, reverse("admin_policies", args=[tenant_a.slug]), "domains_form")
    domains = [f"{'a' * 45}.{'b' * 45}-{i:02d}.test" for i in range(50)]
    assert len("\n".join(domains)) <= 5000 < len("\r\n".join(domains))

    response = client.post(
        reverse("admin_own_domains", args=[tenant_a.slug]),
        {"own_domains": "\r\n".join(domains), "based_on": base},
    )

    tenant_a.refresh_from_db()
    assert response.status_code == 302
    assert tenant_a.own_domains == domains


def test_a_broadcast_message_is_measured_with_its_line_breaks_as_the_box_counts_them():
    from review.forms_broadcast import BroadcastForm

    field = BroadcastForm.base_fields["text"]
    assert len("ab\r\n" * 300_000) > 1_000_000
    assert field.clean("ab\r\n" * 300_000) == ("ab\n" * 300_000).strip()
