"""A reply posted through the agent API answers a message of its own mailbox and carries the
subject AgentMail will give it (issue 14 item 2)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from intents.models import ApiIdempotencyKey, Draft, DraftVersion, IntentEvent
from tests.agent_api.conftest import draft_body
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db


def received(mailbox, message_id, *, thread_id, subject):
    return InboundMessage.objects.create(
        tenant=mailbox.tenant,
        mailbox=mailbox,
        thread_id=thread_id,
        message_id=message_id,
        sender="customer@example.com",
        subject=subject,
        received_at=timezone.now(),
    )


def assert_refused(response, field):
    problem = response.json()
    assert response.status_code == 422
    assert response["Content-Type"] == "application/problem+json"
    assert [e["field"] for e in problem["errors"]] == [field]
    assert (Draft.objects.count(), DraftVersion.objects.count()) == (0, 0)
    assert (IntentEvent.objects.count(), ApiIdempotencyKey.objects.count()) == (0, 0)
    return problem


def test_reply_to_another_mailboxs_message_is_422_naming_in_reply_to(
    api, token_a, mailbox_a, mailbox_a2
):
    received(mailbox_a2, "<aisha@example.com>", thread_id="thr-aisha", subject="Password")
    body = draft_body(mailbox_a, in_reply_to="<aisha@example.com>")

    problem = assert_refused(api.post("/drafts", body, token=token_a, key="r-1"), "in_reply_to")

    assert problem["code"] == "in_reply_to_unknown"


def test_reply_to_another_thread_is_422_naming_in_reply_to(api, token_a, mailbox_a):
    received(mailbox_a, "<kenji@example.com>", thread_id="thr-kenji", subject="Order")
    received(mailbox_a, "<aisha@example.com>", thread_id="thr-aisha", subject="Password")
    body = draft_body(
        mailbox_a, subject="Re: Order", in_reply_to="<aisha@example.com>", thread_id="thr-kenji"
    )

    problem = assert_refused(api.post("/drafts", body, token=token_a, key="r-2"), "in_reply_to")

    assert problem["code"] == "in_reply_to_other_thread"


def test_a_new_message_naming_a_thread_is_422_naming_thread_id_and_keeps_the_key(
    api, token_a, mailbox_a
):
    """A new message starts its own thread at AgentMail: filed under Kenji's, the reviewer
    would see his conversation beside it and its recipients checked against his."""
    received(mailbox_a, "<kenji@example.com>", thread_id="thr-kenji", subject="Order 77")
    body = draft_body(mailbox_a, subject="Your order", thread_id="thr-kenji")

    problem = assert_refused(api.post("/drafts", body, token=token_a, key="r-6"), "thread_id")
    del body["thread_id"]
    corrected = api.post("/drafts", body, token=token_a, key="r-6")

    assert problem["code"] == "thread_id_without_in_reply_to"
    assert "in_reply_to" in problem["detail"]
    assert corrected.status_code == 201
    assert corrected.json()["thread_id"] == ""
    assert corrected.json()["in_reply_to"] == ""


def test_a_reply_naming_its_own_thread_joins_it(api, token_a, mailbox_a):
    received(mailbox_a, "<kenji@example.com>", thread_id="thr-kenji", subject="Order 77")
    body = draft_body(
        mailbox_a, subject="Re: Order 77", in_reply_to="<kenji@example.com>", thread_id="thr-kenji"
    )

    created = api.post("/drafts", body, token=token_a, key="r-7")

    assert created.status_code == 201
    assert created.json()["thread_id"] == "thr-kenji"
    assert created.json()["in_reply_to"] == "<kenji@example.com>"


def test_reply_with_another_subject_is_422_naming_subject(api, token_a, mailbox_a):
    received(mailbox_a, "<kenji@example.com>", thread_id="thr-kenji", subject="Order 77")
    body = draft_body(mailbox_a, subject="Re: Password", in_reply_to="<kenji@example.com>")

    problem = assert_refused(api.post("/drafts", body, token=token_a, key="r-3"), "subject")

    assert '"Re: Order 77"' in problem["detail"]


def test_reply_without_a_subject_gets_the_derived_one_and_keeps_it(api, token_a, mailbox_a):
    received(mailbox_a, "<kenji@example.com>", thread_id="thr-kenji", subject="Order 77")
    body = draft_body(mailbox_a, in_reply_to="<kenji@example.com>")
    del body["subject"]

    created = api.post("/drafts", body, token=token_a, key="r-4")
    revised = api.post(
        f"/drafts/{created.json()['id']}/versions",
        {"to": ["customer@example.com"], "text": "It arrives tomorrow."},
        token=token_a,
    )

    assert created.status_code == 201
    assert created.json()["thread_id"] == "thr-kenji"
    assert created.json()["current_version"]["subject"] == "Re: Order 77"
    assert revised.status_code == 201
    assert revised.json()["current_version"]["subject"] == "Re: Order 77"
    assert revised.json()["current_version"]["number"] == 2


def test_a_new_message_without_a_subject_is_422_naming_subject(api, token_a, mailbox_a):
    body = draft_body(mailbox_a)
    del body["subject"]

    assert_refused(api.post("/drafts", body, token=token_a, key="r-5"), "subject")


@pytest.mark.parametrize(
    ("stored", "written"),
    [("<kenji@example.com>", "kenji@example.com"), ("kenji@example.com", "<kenji@example.com>")],
)
def test_a_message_id_written_without_or_with_its_angle_brackets_is_422_naming_its_form(
    api, token_a, mailbox_a, stored, written
):
    """The Message-ID as a mail library gives it (without <>) was refused as unknown "if it
    arrived only just now, retry in a few seconds": an agent retried for ever. It is compared
    exactly (another message may differ by its brackets), and the refusal says how it is
    written."""
    received(mailbox_a, stored, thread_id="thr-kenji", subject="Order 77")
    body = draft_body(mailbox_a, subject=None, in_reply_to=written)

    problem = assert_refused(api.post("/drafts", body, token=token_a, key="r-8"), "in_reply_to")

    assert problem["code"] == "in_reply_to_written_otherwise"
    assert stored in problem["detail"]
    assert "retry" not in problem["detail"]


def test_another_mailboxs_message_id_is_not_suggested(api, token_a, mailbox_a, mailbox_a2):
    received(mailbox_a2, "<aisha@example.com>", thread_id="thr-aisha", subject="Password")
    body = draft_body(mailbox_a, subject=None, in_reply_to="aisha@example.com")

    problem = assert_refused(api.post("/drafts", body, token=token_a, key="r-9"), "in_reply_to")

    assert problem["code"] == "in_reply_to_unknown"
    assert "<aisha@example.com>" not in problem["detail"]
