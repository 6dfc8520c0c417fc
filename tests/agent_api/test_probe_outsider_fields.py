"""Tenant A's agent token naming tenant B's objects in the body of a request, not in its path
(``test_outsider_sweep`` walks the ids in paths): B's mailbox by id or address however spelt, a
message B received as ``in_reply_to`` (also written without its angle brackets), B's thread as
``thread_id``, a file of B's message in ``forward_attachments``. Each answer is compared whole
(status, headers, bytes) with the answer to the same request naming nothing that exists, so that
no difference tells A what B has. Then hostile sizes and header breaks in the fields that the
other probes leave out: a 4.5 MB string (under the body limit) in every field, and line breaks
in an attachment's filename and content type, each a 4xx naming the field, nothing stored."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from intents.models import ApiIdempotencyKey, AttachmentBlob, Draft, DraftVersion, IntentEvent
from tests.agent_api.conftest import draft_body
from tests.agent_api.test_attachments import _customer_wrote, _file
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db

# Expires is the answer's own clock (no caching), the only header two answers may differ in.
TIMED_HEADERS = {"expires", "date"}


def whole(response) -> tuple:
    headers = sorted(
        (name.lower(), value)
        for name, value in response.headers.items()
        if name.lower() not in TIMED_HEADERS
    )
    return response.status_code, headers, response.content


def nothing_stored() -> tuple:
    return (
        Draft.objects.count(),
        DraftVersion.objects.count(),
        IntentEvent.objects.count(),
        ApiIdempotencyKey.objects.count(),
        AttachmentBlob.objects.count(),
    )


def received(mailbox, message_id: str, thread_id: str) -> None:
    InboundMessage.objects.create(
        tenant=mailbox.tenant,
        mailbox=mailbox,
        thread_id=thread_id,
        message_id=message_id,
        sender="customer@example.com",
        subject="Where is my order?",
        received_at=timezone.now(),
    )


def test_another_tenants_mailbox_in_the_body_is_answered_as_a_missing_one_byte_for_byte(
    api, token_a, mailbox_a, mailbox_b
):
    def create(ref):
        return whole(
            api.post("/drafts", draft_body(mailbox_a, mailbox=ref), token=token_a, key="m")
        )

    by_id = [create(mailbox_b.pk), create(2**40)]
    by_address = [
        create(mailbox_b.address),
        create(mailbox_b.address.upper()),
        create(f" {mailbox_b.address} "),
        create("nobody@agentmail.test"),
    ]

    assert by_id[0][0] == 404
    assert by_id[0] == by_id[1]
    assert by_address[0][0] == 404
    assert by_address.count(by_address[0]) == len(by_address)
    assert nothing_stored() == (0, 0, 0, 0, 0)


@pytest.mark.parametrize("written", ["<m1@example.com>", "m1@example.com"])
def test_a_message_another_tenant_received_is_answered_as_one_nobody_received(
    api, token_a, mailbox_a, mailbox_b, written
):
    """Also written without its angle brackets: the refusal that names how a message id is
    written (``in_reply_to_written_otherwise``) looks only at A's own mailbox."""
    body = draft_body(mailbox_a, in_reply_to=written)
    unknown = whole(api.post("/drafts", body, token=token_a, key="r"))
    received(mailbox_b, "<m1@example.com>", "thr-b")

    known_to_b = whole(api.post("/drafts", body, token=token_a, key="r"))

    assert unknown[0] == 422
    assert known_to_b == unknown
    assert nothing_stored() == (0, 0, 0, 0, 0)


def test_another_tenants_thread_is_answered_as_one_that_does_not_exist(
    api, token_a, mailbox_a, mailbox_b
):
    received(mailbox_a, "<a1@example.com>", "thr-a")
    body = draft_body(mailbox_a, in_reply_to="<a1@example.com>", thread_id="thr-b")
    unknown = whole(api.post("/drafts", body, token=token_a, key="t"))
    received(mailbox_b, "<b1@example.com>", "thr-b")

    known_to_b = whole(api.post("/drafts", body, token=token_a, key="t"))

    assert unknown[0] == 422
    assert known_to_b == unknown
    assert nothing_stored() == (0, 0, 0, 0, 0)


def test_forwarding_a_file_of_another_tenants_message_reveals_and_fetches_nothing(
    api, token_a, mailbox_a, mailbox_b, sandbox
):
    """B's message named as the one answered is unknown to A before any fetch; B's file named
    from A's own message is the unknown file that a made-up id is (the fetch uses A's inbox and
    key, so it cannot reach B's message)."""
    theirs, [their_file] = _customer_wrote(
        sandbox, mailbox_b, [_file("passport.png", "image/png", b"\x89PNG\r\n\x1a\n" * 30)]
    )
    mine, _ = _customer_wrote(sandbox, mailbox_a, [])
    InboundMessage.objects.filter(mailbox=mailbox_b).delete()
    fetches = len(sandbox.requests(route="get_attachment"))

    def forward(in_reply_to, attachment_id, known_to_b):
        if known_to_b:
            received(mailbox_b, theirs, "thr-b")
        body = draft_body(mailbox_a, in_reply_to=in_reply_to, forward_attachments=[attachment_id])
        answer = whole(api.post("/drafts", body, token=token_a, key="f"))
        InboundMessage.objects.filter(mailbox=mailbox_b).delete()
        return answer

    from_theirs = forward(theirs, their_file, known_to_b=True)
    from_nobodys = forward(theirs, their_file, known_to_b=False)
    fetched_from_theirs = len(sandbox.requests(route="get_attachment")) - fetches
    their_file_from_mine = api.post(
        "/drafts",
        draft_body(mailbox_a, in_reply_to=mine, forward_attachments=[their_file]),
        token=token_a,
        key="g",
    ).json()
    made_up_from_mine = api.post(
        "/drafts",
        draft_body(mailbox_a, in_reply_to=mine, forward_attachments=["att-made-up"]),
        token=token_a,
        key="h",
    ).json()

    assert from_theirs[0] == 422
    assert from_theirs == from_nobodys
    assert fetched_from_theirs == 0
    assert their_file_from_mine["code"] == made_up_from_mine["code"]
    assert their_file_from_mine["code"] == "forward_attachment_unknown"
    assert their_file_from_mine["errors"][0]["field"] == "forward_attachments[0]"
    assert nothing_stored() == (0, 0, 0, 0, 0)


BIG = "a" * 4_500_000


def _with_big(mailbox, field: str) -> dict:
    body = draft_body(mailbox)
    if field == "provenance":
        body[field] = {"note": BIG}
    elif field in ("to", "cc", "bcc"):
        body[field] = [BIG + "@example.com"]
    elif field == "forward_attachments":
        body.update(in_reply_to="<m@example.com>", forward_attachments=[BIG])
    elif field.startswith("attachments[0]."):
        body["attachments"] = [{**_file(), field.removeprefix("attachments[0]."): BIG}]
    else:
        body[field] = BIG
    return body


@pytest.mark.parametrize(
    ("field", "named"),
    [
        ("mailbox", "mailbox"),
        ("in_reply_to", "in_reply_to"),
        ("thread_id", "thread_id"),
        ("subject", "subject"),
        ("text", "text"),
        ("html", "html"),
        ("to", "to[0]"),
        ("cc", "cc[0]"),
        ("bcc", "bcc[0]"),
        ("provenance", "provenance"),
        ("not_after", "not_after"),
        ("priority", "priority"),
        ("forward_attachments", "forward_attachments[0]"),
        ("attachments[0].filename", "attachments[0].filename"),
        ("attachments[0].content_type", "attachments[0].content_type"),
        ("attachments[0].content", "attachments[0]"),
    ],
)
def test_a_four_and_a_half_megabyte_field_is_a_422_naming_it_that_stores_nothing(
    api, token_a, mailbox_a, field, named
):
    raw = json.dumps(_with_big(mailbox_a, field))

    response = api.post("/drafts", raw=raw, token=token_a, key="big")

    assert len(raw) > 4_500_000
    assert response.status_code == 422, response.content[:300]
    assert [e["field"] for e in response.json()["errors"]] == [named]
    assert len(response.content) < 2_000
    assert nothing_stored() == (0, 0, 0, 0, 0)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("filename", "invoice\r\nContent-Type: text/html.pdf"),
        ("filename", "invoice\r\n.pdf"),
        ("filename", "invoice\u2028.pdf"),
        ("filename", "invoice\u0085.pdf"),
        ("content_type", "application/pdf\r\nX-Injected: 1"),
        ("content_type", 'application/pdf; name="a\r\n"'),
    ],
)
def test_a_line_break_in_an_attachments_filename_or_type_is_a_422_naming_it(
    api, token_a, mailbox_a, field, value
):
    body = draft_body(mailbox_a, attachments=[{**_file(), field: value}])

    response = api.post("/drafts", body, token=token_a, key="crlf")

    assert response.status_code == 422, response.content
    assert response.json()["errors"][0]["field"] == "attachments[0]"
    assert nothing_stored() == (0, 0, 0, 0, 0)
