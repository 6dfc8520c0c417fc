"""An agent writing to an address the reviewer would read as another, or that the recipient
policy should judge as written in another spelling: what is stored, shown, approved and sent is
one form of it (common.addresses), the domain in ASCII."""

from __future__ import annotations

import pytest
from django.db.models.functions import Now
from django.urls import reverse

from console.services import suppression_add
from intents import sending, services
from intents.models import Draft, DraftVersion, SendIntent
from tests.agent_api.conftest import draft_body
from tests.pages import based_on

# "example.com" with a Cyrillic small a (U+0430): another domain, which looks exactly like it.
LOOKALIKE = "billing@ex\u0430mple.com"
LOOKALIKE_ASCII = "billing@xn--exmple-4nf.com"


@pytest.mark.django_db(transaction=True)
def test_a_look_alike_domain_is_shown_approved_and_sent_as_the_domain_it_is(
    api, token_a, mailbox_a, member_of, signed_in, sandbox
):
    created = api.post(
        "/drafts", draft_body(mailbox_a, to=[LOOKALIKE]), token=token_a, key="k-lookalike"
    )
    approver = member_of(mailbox_a.tenant, "approver").user
    queue = signed_in(approver).get(reverse("tenant_home", args=[mailbox_a.tenant.slug]))
    version = DraftVersion.objects.get(draft_id=created.json()["id"])
    intent = services.draft_approve(
        tenant=mailbox_a.tenant,
        draft_id=version.draft_id,
        version=1,
        content_hash=version.content_hash,
        actor=approver,
    )
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now())
    sending.run_once(worker="t", intent_id=intent.pk)

    assert created.status_code == 201
    assert version.to == [LOOKALIKE_ASCII]
    # The queue a reviewer approves from in bulk shows the first recipient of each row.
    assert LOOKALIKE_ASCII in queue.content.decode()
    assert LOOKALIKE not in queue.content.decode()
    sent = sandbox.ledger(idempotency_key=intent.idempotency_key)
    assert [message["to"] for message in sent] == [[LOOKALIKE_ASCII]]


@pytest.mark.django_db
def test_an_idn_domain_allowed_in_either_spelling_admits_both_and_nothing_like_it(
    api, token_a, mailbox_a, member_of, signed_in
):
    admin = signed_in(member_of(mailbox_a.tenant, "admin").user)
    page = reverse("mailbox_detail", args=[mailbox_a.tenant.slug, mailbox_a.pk])
    saved = admin.post(
        reverse("mailbox_policy", args=[mailbox_a.tenant.slug, mailbox_a.pk]),
        {
            "policy_mode": "restricted",
            "allowed_domains": "Bücher.DE",
            "allowed_addresses": "Zoë@Café.example",
            "based_on": based_on(admin, page),
        },
    )

    def status(address: str) -> int:
        body = draft_body(mailbox_a, to=[address])
        return api.post(
            "/drafts", body, token=token_a, key=f"k-{address.encode().hex()}"
        ).status_code

    assert saved.status_code == 302
    mailbox_a.refresh_from_db()
    assert mailbox_a.allowed_domains == ["xn--bcher-kva.de"]
    assert mailbox_a.allowed_addresses == ["zoë@xn--caf-dma.example"]
    assert status("ana@xn--bcher-kva.de") == 201
    assert status("ANA@BÜCHER.DE") == 201
    assert status("zoë@xn--caf-dma.example") == 201
    assert status("ana@sub.bücher.de") == 422
    assert status("ana@bücher.de.evil.example") == 422
    assert status("ana@b\u00fbcher.de") == 422  # û, not ü
    assert status("other@café.example") == 422
    assert Draft.objects.count() == 3


# "ǰ" written as a capital J and a combining caron: NFC has no capital to compose it to, so only
# its lower-cased form composes (U+01F0). The same address in both spellings.
DECOMPOSED_CAPITAL = "J\u030cx@example.com"
COMPOSED = "\u01f0x@example.com"


@pytest.mark.django_db(transaction=True)
def test_an_address_suppressed_in_one_spelling_is_refused_in_the_other(
    api, token_a, mailbox_a, member_of, sandbox
):
    admin = member_of(mailbox_a.tenant, "admin").user
    suppression_add(tenant=mailbox_a.tenant, address=DECOMPOSED_CAPITAL, note="asked", actor=admin)

    created = api.post("/drafts", draft_body(mailbox_a, to=[COMPOSED]), token=token_a, key="k-j")

    assert created.status_code == 422
    assert created.json()["code"] == "recipient_suppressed"
    assert Draft.objects.count() == 0
    assert sandbox.ledger(inbox_id=mailbox_a.inbox_id) == []


@pytest.mark.django_db(transaction=True)
def test_an_address_the_admin_allowed_passes_a_reviewers_edit_in_another_spelling_and_is_sent(
    api, token_a, mailbox_a, member_of, signed_in, sandbox
):
    admin = signed_in(member_of(mailbox_a.tenant, "admin").user)
    page = reverse("mailbox_detail", args=[mailbox_a.tenant.slug, mailbox_a.pk])
    admin.post(
        reverse("mailbox_policy", args=[mailbox_a.tenant.slug, mailbox_a.pk]),
        {
            "policy_mode": "restricted",
            "allowed_domains": "example.org",
            "allowed_addresses": DECOMPOSED_CAPITAL,
            "based_on": based_on(admin, page),
        },
    )
    created = api.post(
        "/drafts", draft_body(mailbox_a, to=["ana@example.org"]), token=token_a, key="k-j"
    )
    approver = member_of(mailbox_a.tenant, "approver").user
    edited = services.draft_add_version(
        tenant=mailbox_a.tenant,
        draft_id=created.json()["id"],
        to=[DECOMPOSED_CAPITAL],
        cc=[],
        bcc=[],
        subject="Re: Where is my order?",
        text="It shipped yesterday.",
        html="",
        actor_user=approver,
        base_version=1,
    )
    intent = services.draft_approve(
        tenant=mailbox_a.tenant,
        draft_id=edited.draft_id,
        version=2,
        content_hash=edited.content_hash,
        actor=member_of(mailbox_a.tenant, "approver").user,
    )
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now())
    sending.run_once(worker="t", intent_id=intent.pk)

    mailbox_a.refresh_from_db()
    assert mailbox_a.allowed_addresses == [COMPOSED]
    assert edited.to == [COMPOSED]
    sent = sandbox.ledger(idempotency_key=intent.idempotency_key)
    assert [message["to"] for message in sent] == [[COMPOSED]]
