"""The sandbox takes attachments as AgentMail does (base64 `content`, a 6 MB request) and keeps
their bytes: in the ledger for sends, behind a download URL for received mail."""

from __future__ import annotations

import base64

import httpx
import pytest
from agentmail.core.api_error import ApiError
from agentmail.inboxes import CreateInboxRequest


def _inbox(sandbox, name="files"):
    return sandbox.sdk().inboxes.create(request=CreateInboxRequest(username=name))


def test_a_send_records_its_attachments_bytes_in_the_ledger(sandbox):
    inbox = _inbox(sandbox)
    data = bytes(range(256)) * 10
    sent = sandbox.sdk().inboxes.messages.send(
        inbox.inbox_id,
        to="customer@example.com",
        subject="Files",
        text="Attached.",
        attachments=[
            {
                "filename": "a.bin",
                "content_type": "application/octet-stream",
                "content": base64.b64encode(data).decode(),
            }
        ],
        idempotency_key="att-1",
    )

    [entry] = sandbox.ledger(idempotency_key="att-1")
    [attachment] = entry["attachments"]
    message = sandbox.sdk().inboxes.messages.get(inbox.inbox_id, sent.message_id)
    assert base64.b64decode(attachment["content"]) == data
    assert (attachment["filename"], attachment["size"]) == ("a.bin", len(data))
    assert message.attachments[0].size == len(data)


def test_bad_base64_is_400_and_a_request_over_6_mb_is_413_with_nothing_sent(sandbox):
    inbox = _inbox(sandbox, "limits")
    client = sandbox.sdk()
    bad = {"filename": "a.txt", "content_type": "text/plain", "content": "no base64!"}
    huge = {"filename": "b.txt", "content_type": "text/plain", "content": "QUFB" * 1_600_000}

    with pytest.raises(ApiError) as refused:
        client.inboxes.messages.send(
            inbox.inbox_id,
            to="c@example.com",
            subject="x",
            text="x",
            attachments=[bad],
            request_options={"max_retries": 0},
        )
    with pytest.raises(ApiError) as too_large:
        client.inboxes.messages.send(
            inbox.inbox_id,
            to="c@example.com",
            subject="x",
            text="x",
            attachments=[huge],
            request_options={"max_retries": 0},
        )

    assert refused.value.status_code == 400
    assert too_large.value.status_code == 413
    assert sandbox.ledger(inbox_id=inbox.inbox_id) == []


def test_a_received_attachment_downloads_from_its_url_without_credentials(sandbox):
    inbox = _inbox(sandbox, "inbound")
    photo = b"\x89PNG\r\n\x1a\n photo"
    received = sandbox.inbound(
        inbox.inbox_id,
        from_="customer@example.com",
        subject="Photo",
        text="See attached.",
        attachments=[
            {
                "filename": "p.png",
                "content_type": "image/png",
                "content": base64.b64encode(photo).decode(),
            }
        ],
    )
    client = sandbox.sdk()
    message = client.inboxes.messages.get(inbox.inbox_id, received["message_id"])
    meta = client.inboxes.messages.get_attachment(
        inbox.inbox_id, received["message_id"], message.attachments[0].attachment_id
    )

    assert httpx.get(meta.download_url, trust_env=False).content == photo
    assert (meta.filename, meta.size) == ("p.png", len(photo))
    with pytest.raises(ApiError) as missing:
        client.inboxes.messages.get_attachment(inbox.inbox_id, received["message_id"], "nope")
    assert missing.value.status_code == 404
