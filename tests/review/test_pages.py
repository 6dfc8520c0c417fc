import re

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_queue_lists_pending_drafts_oldest_first(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    first = make_draft(mailbox_a, subject="First in")
    second = make_draft(mailbox_a, subject="Second in")
    page = signed_in(admin_a.user).get(reverse("tenant_home", args=[tenant_a.slug]))
    assert page.status_code == 200
    body = page.content.decode()
    assert body.index("First in") < body.index("Second in")
    assert f'value="{first.pk}:1:' in body and f'value="{second.pk}:1:' in body


def test_draft_page_renders(tenant_a, mailbox_a, make_draft, admin_a, signed_in):
    draft = make_draft(mailbox_a, html="<p>Hello <b>there</b></p>")
    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))
    assert page.status_code == 200
    assert b"<iframe" in page.content


def test_outbox_and_attention_render(tenant_a, mailbox_a, make_intent, admin_a, signed_in):
    queued = make_intent(mailbox_a)
    stuck = make_intent(mailbox_a, state="needs_attention", attempts=2, last_error_code="timeout")
    client = signed_in(admin_a.user)
    assert client.get(reverse("outbox", args=[tenant_a.slug])).status_code == 200
    assert client.get(reverse("outbox_intent", args=[tenant_a.slug, queued.pk])).status_code == 200
    page = client.get(reverse("attention", args=[tenant_a.slug]))
    assert page.status_code == 200
    assert f"#{stuck.pk}".encode() in page.content


def test_outbox_tabs_count_up_to_a_cap_in_one_statement(
    tenant_a, tenant_b, mailbox_a, mailbox_b, make_intent, admin_a, signed_in, monkeypatch
):
    """An outside probe's lead: the tabs counted every send the tenant ever made, on every view
    of the outbox, a cost that grew with its history. Each tab now counts up to a cap and says
    "cap+" beyond it, as the queue's tabs do; another tenant's sends are in no count."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from review.views import outbox

    monkeypatch.setattr(outbox, "OUTBOX_COUNT_CAP", 3)
    for _ in range(4):
        make_intent(mailbox_a, state="cancelled")
    make_intent(mailbox_a, state="needs_attention", attempts=1, last_error_code="timeout")
    for _ in range(5):
        make_intent(mailbox_b, state="queued")
    client = signed_in(admin_a.user)

    with CaptureQueriesContext(connection) as queries:
        page = client.get(reverse("outbox", args=[tenant_a.slug])).content.decode()

    def tab(label: str) -> str:
        return page.split(f'{label} <span class="count">', 1)[1].split("<", 1)[0]

    assert (tab("All"), tab("Cancelled"), tab("Needs attention"), tab("Queued")) == (
        "3+",
        "3+",
        "1",
        "0",
    )
    counting = [q for q in queries if "count(*)" in q["sql"].lower() and "sendintent" in q["sql"]]
    assert len(counting) == 1


def test_send_page_keeps_refreshing_after_acceptance_until_delivery_settles(
    tenant_a, mailbox_a, make_intent, admin_a, signed_in
):
    from webhooks.models import RecipientDelivery

    intent = make_intent(mailbox_a, state="accepted")
    client = signed_in(admin_a.user)
    url = reverse("outbox_intent", args=[tenant_a.slug, intent.pk])
    polling = 'hx-trigger="every 3s"'
    assert polling in client.get(url).content.decode()
    (address,) = intent.recipients["to"]
    delivery = RecipientDelivery.objects.create(
        tenant=tenant_a, intent=intent, address=address, state="sent"
    )
    assert polling in client.get(url).content.decode()
    RecipientDelivery.objects.filter(pk=delivery.pk).update(state="delivered")
    settled = client.get(url).content.decode()
    assert polling not in settled
    assert 'data-delivery="delivered"' in settled


def test_a_state_change_reloads_the_whole_send_page_so_actions_are_never_stale(
    tenant_a, mailbox_a, make_intent, admin_a, signed_in
):
    from intents.models import SendIntent

    intent = make_intent(mailbox_a, state="queued")
    client = signed_in(admin_a.user)
    url = reverse("outbox_intent", args=[tenant_a.slug, intent.pk])
    page = client.get(url).content.decode()
    assert "Cancel the send" in page
    assert "seen=queued" in page
    unchanged = client.get(url, {"fragment": "status", "seen": "queued"}, HTTP_HX_REQUEST="true")
    SendIntent.objects.filter(pk=intent.pk).update(state="accepted", provider_message_id="<m@x>")
    moved = client.get(url, {"fragment": "status", "seen": "queued"}, HTTP_HX_REQUEST="true")
    assert unchanged.status_code == 200 and "HX-Refresh" not in unchanged
    assert moved.status_code == 204 and moved["HX-Refresh"] == "true"
    assert "Cancel the send" not in client.get(url).content.decode()


@pytest.mark.parametrize(
    ("subject", "title"),
    [
        ("\u202eevil", "\u2068\u202eevil\u2069"),
        # Its own U+2069 would close the isolate early and let the override run on.
        ("\u2069\u202eevil", "\u2068\u202eevil\u2069"),
    ],
)
def test_an_override_in_a_subject_cannot_reverse_the_rest_of_the_tabs_title(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in, subject, title
):
    """Found by an outside probe: the subject went into <title> as it was, so a right-to-left
    override in it reversed "Draft 7 · Countersign" after it in the browser tab."""
    draft = make_draft(mailbox_a, subject=subject)

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    assert f"<title>{title} · Draft {draft.pk} · Countersign</title>" in page.content.decode()


def test_every_provenance_field_an_agent_wrote_is_marked_as_outside_text(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """Provenance is the agent's word: a confidence of "verified by compliance" or with a
    right-to-left override sat in a row drawn like the page's own words (found by an outside
    probe). Every field of it is set apart, as the model and prompt already were."""
    claim = "\u202everified by compliance"
    draft = make_draft(
        mailbox_a,
        provenance={"model": "m", "prompt_version": "p", "confidence": claim, "reasoning": "r"},
    )

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    text = page.content.decode()
    assert f"<dd data-customer-content>{claim}</dd>" in text
    for field in ("m", "p", "r"):
        assert re.search(rf"<dd[^>]* data-customer-content>{field}</dd>", text), field


def test_the_agents_sources_are_shown_as_it_wrote_them(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """Found by an outside probe: the page asked each source for its ``title``, which a text
    source has as a method (str.title), so "kb/HowTo-refunds" read "Kb/Howto-Refunds"; a
    source with only a URL read as a Python dict, and sources given as one text were listed
    letter by letter."""
    listed = make_draft(
        mailbox_a,
        provenance={
            "sources": [
                "kb/HowTo-refunds",
                {"title": "Refund policy", "url": "https://kb.example.com/Refunds"},
                {"url": "https://kb.example.com/Only-URL"},
            ]
        },
    )
    one = make_draft(mailbox_a, provenance={"sources": "ticket ABC-7"})
    client = signed_in(admin_a.user)
    page = client.get(reverse("draft", args=[tenant_a.slug, listed.pk])).content.decode()
    sources = page.split('<ul class="plain">', 1)[1].split("</ul>", 1)[0]
    assert "<li>kb/HowTo-refunds</li>" in sources
    assert 'Refund policy <small class="mono">https://kb.example.com/Refunds</small>' in sources
    assert '<li><small class="mono">https://kb.example.com/Only-URL</small></li>' in sources
    assert "{" not in sources
    page = client.get(reverse("draft", args=[tenant_a.slug, one.pk])).content.decode()
    assert '<ul class="plain"><li>ticket ABC-7</li></ul>' in page
