"""Releasing a send held because the customer wrote again after the reply was approved. The send's
page shows the customer's messages written after the draft, and its release form carries their
ids; a message the page did not show (one that came while the send was already held, which holds
nothing more) refuses the release, and the page then shows it. The message's store and a release at
the same moment meet on the send's lock: either the release sees the message or the message holds
the released send again."""

from __future__ import annotations

import re
import threading
import types
from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.db import connections, transaction
from django.urls import reverse
from django.utils import timezone, translation

from intents import errors, sending, services
from intents.models import DraftVersion, IntentEvent, SendIntent
from intents.reason_words import SYSTEM_REASONS
from tests.intents.conftest import fast_send  # noqa: F401
from tests.intents.helpers import blocked_on_a_lock
from tests.review.wrote_again import (
    customer_writes,
    customer_wrote,
    draft_answering,
    release_form,
)
from tests.webhooks.conftest import hook_for, received_payload  # noqa: F401
from webhooks.models import InboundMessage
from webhooks.services.apply import HOLD_REASON

pytestmark = pytest.mark.django_db


def visible(html: str) -> str:
    """The page's text as read: no tags, so no attribute values (the code in a title)."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def flash(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def held(tenant_a, member_of, mailbox_factory, sandbox, fast_send, client, hook_for):  # noqa: F811
    """A reply approved in a sandbox mailbox, then held by the webhook applier: the customer
    wrote "Cancel that" (through the signed webhook). ``.writes(subject)`` delivers another
    message of the thread; ``.page()`` and ``.release(form)`` are the reviewer's (an admin)."""
    mailbox = mailbox_factory(tenant_a)
    hook = hook_for(tenant_a)

    def writes(subject: str, in_reply_to: str | None = None) -> dict:
        return customer_writes(sandbox, hook, client, mailbox, subject, in_reply_to)

    first = writes("Refund?")
    draft = services.draft_create(
        tenant=tenant_a,
        mailbox=mailbox,
        to=["jane@customer.test"],
        text="We refunded it.",
        thread_id=first["thread_id"],
        in_reply_to=first["message_id"],
        actor_user=member_of(tenant_a, "approver").user,
    )
    reviewer = member_of(tenant_a, "admin").user
    intent = services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=DraftVersion.objects.get(draft=draft).content_hash,
        actor=reviewer,
    )
    writes("Cancel that", in_reply_to=first["message_id"])
    intent.refresh_from_db()
    assert intent.held_reason and intent.state == "queued"
    client.force_login(reviewer, backend="django.contrib.auth.backends.ModelBackend")
    url = reverse("outbox_intent", args=[tenant_a.slug, intent.pk])
    release_url = reverse("intent_release", args=[tenant_a.slug, intent.pk])
    return types.SimpleNamespace(
        intent=intent,
        mailbox=mailbox,
        writes=lambda subject: writes(subject, in_reply_to=first["message_id"]),
        page=lambda: client.get(url).content.decode(),
        release=lambda form: client.post(release_url, form),
        sent=lambda: sandbox.ledger(inbox_id=mailbox.inbox_id),
    )


@pytest.mark.django_db(transaction=True)
def test_a_held_send_whose_page_showed_the_message_is_released_and_sent_once(held):
    page = held.page()
    assert "The customer wrote again" in page and "Cancel that" in page

    answer = held.release(release_form(page))
    sending.run_once(worker="t", limit=5)

    held.intent.refresh_from_db()
    assert answer.status_code == 302 and held.intent.state == "accepted"
    assert len(held.sent()) == 1
    cancel_that = InboundMessage.objects.get(subject="Cancel that")
    released = IntentEvent.objects.get(intent=held.intent, action="intent.released")
    assert released.data["messages_seen"] == [cancel_that.pk]


@pytest.mark.django_db(transaction=True)
def test_a_message_that_arrives_after_the_page_loaded_refuses_the_release_until_it_is_read(held):
    seen = release_form(held.page())
    # The send is already held: this message holds nothing more, and nobody has read it.
    held.writes("Actually, I found the order")

    refused = held.release(seen)
    sending.run_once(worker="t", limit=5)

    held.intent.refresh_from_db()
    assert refused.status_code == 302
    assert refused.url == reverse("outbox_intent", args=[held.intent.tenant.slug, held.intent.pk])
    assert any("since this page was loaded" in m for m in flash(refused))
    assert held.intent.held_reason and held.intent.state == "queued"
    assert held.sent() == []

    page = held.page()
    assert "Actually, I found the order" in page
    again = release_form(page)
    assert again["messages_seen"] != seen["messages_seen"]
    held.release(again)
    sending.run_once(worker="t", limit=5)
    held.intent.refresh_from_db()
    assert held.intent.state == "accepted"
    assert len(held.sent()) == 1


# --- without the sandbox: a local mailbox, the hold applied as the webhook applier applies it ----


@pytest.fixture
def held_locally(tenant_a, mailbox_a, make_draft, admin_a):
    """A held reply of a local mailbox whose customer wrote "Message 2" after the draft."""
    draft = draft_answering(tenant_a, mailbox_a, make_draft, "thr-held")
    version = DraftVersion.objects.get(draft=draft)
    intent = services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=version.content_hash,
        actor=admin_a.user,
    )
    message = customer_wrote(tenant_a, mailbox_a, "thr-held", 2, timezone.now())
    services.intents_hold_stale(
        mailbox=mailbox_a,
        thread_id="thr-held",
        message_id=message.message_id,
        written_at=message.received_at,
        reason="customer wrote again",
    )
    intent.refresh_from_db()
    assert intent.held_reason
    return types.SimpleNamespace(intent=intent, message=message)


def still_held(intent: SendIntent) -> bool:
    intent.refresh_from_db()
    released = IntentEvent.objects.filter(intent=intent, action="intent.released").exists()
    return intent.state == "queued" and bool(intent.held_reason) and not released


@pytest.mark.parametrize("value", ["x", "{pk},,{pk}", "{pk};1", "0", "-{pk}", "1" * 20, "{pk} "])
def test_a_malformed_list_of_seen_messages_is_refused_and_changes_nothing(
    tenant_a, admin_a, signed_in, held_locally, value
):
    url = reverse("intent_release", args=[tenant_a.slug, held_locally.intent.pk])

    answer = signed_in(admin_a.user).post(
        url, {"messages_seen": value.format(pk=held_locally.message.pk)}
    )

    assert answer.status_code == 302
    assert any("nothing was changed" in m for m in flash(answer))
    assert still_held(held_locally.intent)


def test_a_release_without_a_page_is_refused_while_the_customer_wrote_unseen(
    tenant_a, admin_a, held_locally
):
    with pytest.raises(errors.CustomerWroteAgain, match="open the send"):
        services.intent_release(
            tenant=tenant_a, intent_id=held_locally.intent.pk, actor=admin_a.user
        )

    assert still_held(held_locally.intent)


def test_another_tenants_send_is_not_found(
    tenant_a, tenant_b, mailbox_b, make_draft, admin_a, member_of, signed_in
):
    """Tenant B's held send, its page and its release, tried by tenant A's admin in A's URLs and
    by a member of both (an admin in A only, a viewer in B) in B's."""
    draft = draft_answering(tenant_b, mailbox_b, make_draft, "thr-b")
    intent = services.draft_approve(
        tenant=tenant_b,
        draft_id=draft.pk,
        version=1,
        content_hash=DraftVersion.objects.get(draft=draft).content_hash,
        actor=member_of(tenant_b, "admin").user,
    )
    message = customer_wrote(tenant_b, mailbox_b, "thr-b", 2, timezone.now())
    services.intent_hold(tenant=tenant_b, intent_id=intent.pk, reason="customer wrote again")
    client = signed_in(admin_a.user)
    seen = {"messages_seen": str(message.pk)}

    page = client.get(reverse("outbox_intent", args=[tenant_a.slug, intent.pk]))
    answer = client.post(reverse("intent_release", args=[tenant_a.slug, intent.pk]), seen)

    assert (page.status_code, answer.status_code) == (404, 404)
    assert still_held(intent)


def test_a_viewer_sees_the_message_but_may_not_release(
    tenant_a, member_of, signed_in, held_locally
):
    client = signed_in(member_of(tenant_a, "viewer").user)
    intent = held_locally.intent

    page = client.get(reverse("outbox_intent", args=[tenant_a.slug, intent.pk])).content.decode()
    answer = client.post(
        reverse("intent_release", args=[tenant_a.slug, intent.pk]),
        {"messages_seen": str(held_locally.message.pk)},
    )

    assert "Message 2" in page and "data-release-form" not in page
    assert answer.status_code == 403
    assert still_held(intent)


def test_hostile_text_of_the_message_is_escaped_on_the_send_page(
    tenant_a, admin_a, signed_in, held_locally
):
    InboundMessage.objects.filter(pk=held_locally.message.pk).update(
        subject='<img src=x onerror="alert(1)">',
        sender="\u202eevil@example.com",
    )

    page = signed_in(admin_a.user).get(
        reverse("outbox_intent", args=[tenant_a.slug, held_locally.intent.pk])
    )

    body = page.content.decode()
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in body
    assert '<img src=x onerror="alert(1)">' not in body
    assert '<bdi class="mono" data-sender-address>[U+202E]evil@example.com</bdi>' in body


def test_the_needs_attention_list_sends_a_held_reply_to_its_page_to_be_released(
    tenant_a, admin_a, signed_in, held_locally
):
    page = signed_in(admin_a.user).get(reverse("attention", args=[tenant_a.slug]) + "?state=held")

    body = page.content.decode()
    send_url = reverse("outbox_intent", args=[tenant_a.slug, held_locally.intent.pk])
    assert f'href="{send_url}#release" data-release-link' in body
    assert reverse("intent_release", args=[tenant_a.slug, held_locally.intent.pk]) not in body


# --- the message stored at the moment of the release ---------------------------------------------


def _release_in_thread(tenant, intent, actor, seen, results: list) -> threading.Thread:
    def release() -> None:
        try:
            results.append(
                services.intent_release(
                    tenant=tenant, intent_id=intent.pk, actor=actor, messages_seen=seen
                )
            )
        except errors.DraftError as exc:
            results.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=release)
    thread.start()
    return thread


def _store_message(mailbox, thread_id: str, n: int) -> None:
    """The applier's transaction (in a thread of its own): the message stored, the thread's
    sends held."""
    try:
        with transaction.atomic():
            message = customer_wrote(mailbox.tenant, mailbox, thread_id, n, timezone.now())
            services.intents_hold_stale(
                mailbox=mailbox,
                thread_id=thread_id,
                message_id=message.message_id,
                written_at=message.received_at,
                reason="customer wrote again",
            )
    finally:
        connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_a_release_at_the_moment_a_message_is_stored_waits_for_it_and_is_refused(
    tenant_a, mailbox_a, admin_a, held_locally
):
    results: list = []
    seen = [held_locally.message.pk]
    with transaction.atomic():
        message = customer_wrote(tenant_a, mailbox_a, "thr-held", 3, timezone.now())
        services.intents_hold_stale(
            mailbox=mailbox_a,
            thread_id="thr-held",
            message_id=message.message_id,
            written_at=message.received_at,
            reason="customer wrote again",
        )
        releaser = _release_in_thread(tenant_a, held_locally.intent, admin_a.user, seen, results)
        assert blocked_on_a_lock(), "the release did not wait for the message's transaction"
    releaser.join(30)

    [outcome] = results
    assert isinstance(outcome, errors.CustomerWroteAgain)
    assert still_held(held_locally.intent)


@pytest.mark.django_db(transaction=True)
def test_a_message_stored_while_a_release_commits_holds_the_send_again(
    tenant_a, mailbox_a, admin_a, held_locally
):
    intent = held_locally.intent
    storer = threading.Thread(target=_store_message, args=(mailbox_a, "thr-held", 3))
    with transaction.atomic():
        services.intent_release(
            tenant=tenant_a,
            intent_id=intent.pk,
            actor=admin_a.user,
            messages_seen=[held_locally.message.pk],
        )
        storer.start()
        assert blocked_on_a_lock(), "storing the message did not wait for the release"
    storer.join(30)

    intent.refresh_from_db()
    assert intent.state == "queued" and intent.held_reason == "customer wrote again"
    actions = IntentEvent.objects.filter(intent=intent).order_by("id").values_list("action")
    assert [a for (a,) in actions][-2:] == ["intent.released", "intent.held"]


def test_messages_older_than_the_draft_do_not_refuse_a_release_without_a_page(
    tenant_a, mailbox_a, make_draft, admin_a
):
    customer_wrote(tenant_a, mailbox_a, "thr-quiet", 0, timezone.now() - timedelta(hours=2))
    draft = draft_answering(tenant_a, mailbox_a, make_draft, "thr-quiet")
    intent = services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=DraftVersion.objects.get(draft=draft).content_hash,
        actor=admin_a.user,
    )
    services.intent_hold(tenant=tenant_a, intent_id=intent.pk, reason="held by hand")

    released = services.intent_release(tenant=tenant_a, intent_id=intent.pk, actor=admin_a.user)

    assert released.held_reason == ""


@pytest.mark.parametrize("lang", ["de", "es"])
def test_the_release_in_the_journal_gives_the_holds_reason_in_the_readers_language(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in, lang
):
    """The release's journal row carries the hold's reason, which the webhook applier wrote (in
    English, the codes' language), but the row is a person's: the send's and the draft's pages
    showed it as a person's words, 'customer wrote again in this thread after the draft was
    written; re-confirm' on a German or Spanish page."""
    draft = draft_answering(tenant_a, mailbox_a, make_draft, "thr-lang")
    intent = services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=DraftVersion.objects.get(draft=draft).content_hash,
        actor=admin_a.user,
    )
    message = customer_wrote(tenant_a, mailbox_a, "thr-lang", 2, timezone.now())
    services.intents_hold_stale(
        mailbox=mailbox_a,
        thread_id="thr-lang",
        message_id=message.message_id,
        written_at=message.received_at,
        reason=HOLD_REASON,
    )
    services.intent_release(
        tenant=tenant_a, intent_id=intent.pk, actor=admin_a.user, messages_seen=[message.pk]
    )
    admin_a.user.language = lang
    admin_a.user.save(update_fields=["language"])
    client = signed_in(admin_a.user)

    pages = [
        client.get(reverse(name, args=[tenant_a.slug, pk])).content.decode()
        for name, pk in (("outbox_intent", intent.pk), ("draft", draft.pk))
    ]

    with translation.override(lang):
        words = str(SYSTEM_REASONS[HOLD_REASON])
    assert IntentEvent.objects.get(intent=intent, action="intent.released").reason == HOLD_REASON
    assert [visible(page).count(HOLD_REASON) for page in pages] == [0, 0]
    assert [page.count(words) for page in pages] == [2, 2]
