"""Outside probe: a customer's file the agent forwards is hostile input like any upload, and its
refusal must name the field the agent wrote: ``forward_attachments[i]``, the i-th id it asked
for, not ``attachments[n]``, a place in a list it never sent (or another file of it)."""

from __future__ import annotations

import pytest

from agent_api.mcp_tools import call_tool
from intents.models import AttachmentBlob, Draft
from tests.agent_api.conftest import draft_body
from tests.agent_api.test_attachments import PDF, _customer_wrote, _file

pytestmark = pytest.mark.django_db

# What a customer may attach and the draft's checks refuse: each file's name and its code.
HOSTILE = [
    (_file("invoice\u202efdp.exe", "application/pdf", PDF), "attachment_filename_invalid"),
    (_file("../../etc/passwd", "text/plain", b"root"), "attachment_filename_invalid"),
    (_file("report.pdf", "application/pdf", b"MZ\x90\x00" * 20), "attachment_type_refused"),
    (_file("setup.exe", "application/octet-stream", b"hello"), "attachment_type_refused"),
]


@pytest.mark.parametrize(("hostile", "code"), HOSTILE, ids=["rtl", "path", "program", "exe"])
def test_a_refused_forwarded_file_is_named_by_its_place_in_forward_attachments(
    api, token_a, mailbox_a, sandbox, hostile, code
):
    message_id, [fine_id, hostile_id] = _customer_wrote(
        sandbox, mailbox_a, [_file("photo.pdf", "application/pdf", PDF), hostile]
    )
    body = draft_body(
        mailbox_a,
        in_reply_to=message_id,
        attachments=[_file("our-terms.pdf")],
        forward_attachments=[fine_id, hostile_id],
    )

    response = api.post("/drafts", body, token=token_a, key="fwd-hostile")

    problem = response.json()
    assert response.status_code == 422, response.content
    assert problem["code"] == code
    assert [e["field"] for e in problem["errors"]] == ["forward_attachments[1]"]
    assert problem["detail"].startswith("forward_attachments[1] ")
    assert (Draft.objects.count(), AttachmentBlob.objects.count()) == (0, 0)


def test_the_mcp_tool_names_a_refused_forwarded_file_the_same_way(token_a, mailbox_a, sandbox):
    message_id, [hostile_id] = _customer_wrote(
        sandbox, mailbox_a, [_file("setup.exe", "application/octet-stream", b"hello")]
    )

    refused = call_tool(
        raw_token=token_a,
        name="create_draft",
        arguments=draft_body(mailbox_a, in_reply_to=message_id, forward_attachments=[hostile_id]),
    )

    assert refused.is_error
    assert refused.document["errors"][0]["field"] == "forward_attachments[0]"
    assert "setup.exe" in refused.document["detail"]
