"""Attachments through the agent API (and the MCP tool): base64 in JSON, limits that fit
AgentMail's 6 MB request, and a 422 naming the file for anything refused, with nothing written."""

from __future__ import annotations

import base64
import hashlib
import re
import time
from urllib.parse import quote

import pytest

from agent_api.mcp_tools import call_tool
from intents.models import AttachmentBlob, Draft, DraftAttachment, DraftVersion
from tests.agent_api.conftest import draft_body

pytestmark = pytest.mark.django_db

PDF = b"%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n"


def _file(filename="invoice.pdf", content_type="application/pdf", data=PDF, **extra):
    return {
        "filename": filename,
        "content_type": content_type,
        "content": base64.b64encode(data).decode(),
        **extra,
    }


def _refused(response, index, filename):
    assert response.status_code == 422, response.content
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["errors"][0]["field"] == f"attachments[{index}]"
    assert filename in problem["detail"]
    assert Draft.objects.count() == 0
    assert AttachmentBlob.objects.count() == 0
    return problem


def test_a_draft_carries_its_files_and_the_document_lists_them(api, token_a, mailbox_a):
    body = draft_body(mailbox_a, attachments=[_file(), _file("a.txt", "text/plain", b"hello")])

    response = api.post("/drafts", body, token=token_a, key="att-1")

    assert response.status_code == 201, response.content
    files = response.json()["current_version"]["attachments"]
    assert [(f["filename"], f["content_type"], f["size"], f["sha256"]) for f in files] == [
        ("invoice.pdf", "application/pdf", len(PDF), hashlib.sha256(PDF).hexdigest()),
        ("a.txt", "text/plain", 5, hashlib.sha256(b"hello").hexdigest()),
    ]
    assert "content" not in files[0]
    assert response.json()["current_version"]["content_hash"].startswith("2:")


def test_base64_with_mime_line_breaks_is_accepted(api, token_a, mailbox_a):
    data = bytes(range(256)) * 3
    wrapped = base64.encodebytes(data).decode()  # 76 characters a line, as MIME writes it
    body = draft_body(mailbox_a, attachments=[{**_file("blob.dat"), "content": wrapped}])

    response = api.post("/drafts", body, token=token_a, key="att-2")

    assert response.status_code == 201, response.content
    assert bytes(DraftAttachment.objects.get().blob.data) == data


@pytest.mark.parametrize(
    ("upload", "code"),
    [
        ({**_file("scan.pdf"), "content": "not base64!"}, "attachment_base64_invalid"),
        ({**_file("scan.pdf"), "content": "QUJD="}, "attachment_base64_invalid"),
        (_file("setup.exe", "application/octet-stream", b"hello"), "attachment_type_refused"),
        (_file("scan.pdf", "application/pdf", b"MZ\x90\x00" + PDF), "attachment_type_refused"),
        (_file("macro.docm", "application/octet-stream", b"PK\x03\x04"), "attachment_type_refused"),
        (_file("scan.pdf", "application/x-sh", PDF), "attachment_type_refused"),
        (_file("../scan.pdf"), "attachment_filename_invalid"),
        (_file("scan\u202efdp.pdf"), "attachment_filename_invalid"),
    ],
)
def test_a_refused_file_is_422_naming_it_and_writes_nothing(api, token_a, mailbox_a, upload, code):
    body = draft_body(mailbox_a, attachments=[_file("fine.pdf"), upload])

    response = api.post("/drafts", body, token=token_a, key="att-bad")

    problem = _refused(response, 1, "scan" if "scan" in upload["filename"] else upload["filename"])
    assert problem["code"] == code


def test_an_oversize_file_is_422_naming_it(api, token_a, mailbox_a, settings):
    settings.ATTACHMENT_MAX_FILE_BYTES = 1024
    body = draft_body(mailbox_a, attachments=[_file("huge-scan.pdf", data=b"%PDF" + b"x" * 1100)])

    response = api.post("/drafts", body, token=token_a, key="att-big")

    assert _refused(response, 0, "huge-scan.pdf")["code"] == "attachment_too_large"


def test_files_over_the_draft_limit_are_422_naming_the_file_that_crosses_it(
    api, token_a, mailbox_a, settings
):
    settings.ATTACHMENT_MAX_DRAFT_BYTES = 2048
    files = [_file(f"page-{i}.pdf", data=b"%PDF" + b"x" * 900) for i in range(3)]

    response = api.post("/drafts", draft_body(mailbox_a, attachments=files), token=token_a, key="t")

    assert _refused(response, 2, "page-2.pdf")["code"] == "attachments_too_large"


def test_too_many_files_is_422(api, token_a, mailbox_a, settings):
    settings.ATTACHMENT_MAX_FILES = 2
    files = [_file(f"f{i}.pdf") for i in range(3)]

    response = api.post("/drafts", draft_body(mailbox_a, attachments=files), token=token_a, key="n")

    assert response.status_code == 422
    assert response.json()["code"] == "too_many_attachments"
    assert response.json()["errors"][0]["field"] == "attachments"
    assert Draft.objects.count() == 0


def test_a_nul_in_a_filename_is_422_and_writes_nothing(api, token_a, mailbox_a):
    body = draft_body(mailbox_a, attachments=[_file("inv\x00oice.pdf")])

    response = api.post("/drafts", body, token=token_a, key="nul")

    assert response.status_code == 422
    assert "attachments" in response.json()["errors"][0]["field"]
    assert Draft.objects.count() == 0


def test_a_body_over_the_limit_is_413(api, token_a, mailbox_a):
    files = [_file(f"f{i}.pdf", data=b"%PDF" + b"x" * 2_000_000) for i in range(3)]

    response = api.post("/drafts", draft_body(mailbox_a, attachments=files), token=token_a, key="b")

    assert response.status_code == 413
    assert Draft.objects.count() == 0


def test_files_past_the_tenants_storage_quota_are_413_and_write_nothing(
    api, token_a, token_b, mailbox_a, mailbox_b, settings
):
    settings.TENANT_ATTACHMENT_STORAGE_BYTES = len(PDF) + 100
    settings.MAILBOX_ATTACHMENT_STORAGE_SHARE = 1
    other = _file("other.pdf", data=PDF + b"x" * 200)
    draft_id = api.post(
        "/drafts", draft_body(mailbox_a, attachments=[_file()]), token=token_a, key="q1"
    ).json()["id"]

    create = api.post(
        "/drafts", draft_body(mailbox_a, attachments=[other]), token=token_a, key="q2"
    )
    revise = api.post(
        f"/drafts/{draft_id}/versions",
        {
            "to": ["customer@example.com"],
            "subject": "Re: Where is my order?",
            "text": "x",
            "attachments": [_file(), other],
        },
        token=token_a,
    )
    tool = call_tool(
        raw_token=token_a, name="create_draft", arguments=draft_body(mailbox_a, attachments=[other])
    )
    same_bytes = api.post(
        "/drafts", draft_body(mailbox_a, attachments=[_file()]), token=token_a, key="q3"
    )
    another_tenant = api.post(
        "/drafts", draft_body(mailbox_b, attachments=[_file()]), token=token_b, key="q2"
    )

    assert (create.status_code, revise.status_code) == (413, 413)
    assert create["Content-Type"] == "application/problem+json"
    problem = create.json()
    assert (problem["code"], problem["title"]) == (
        "storage_quota_exceeded",
        "Storage quota exceeded",
    )
    assert problem["errors"] == [{"field": "attachments", "message": problem["detail"]}]
    assert f"past its quota of {len(PDF) + 100} bytes" in problem["detail"]
    # Not how much the tenant holds: a token limited to some mailboxes would read, through it,
    # the files of the others come and go (the console shows a tenant admin the figures).
    assert not re.search(rf"\b{len(PDF)}\b", problem["detail"])
    assert (tool.is_error, tool.document["status"]) == (True, 413)
    assert (same_bytes.status_code, another_tenant.status_code) == (201, 201)
    assert Draft.objects.filter(tenant=mailbox_a.tenant).count() == 2
    assert DraftVersion.objects.filter(draft_id=draft_id).count() == 1
    assert AttachmentBlob.objects.filter(tenant=mailbox_a.tenant).count() == 1


def test_a_mailbox_token_past_its_share_is_413_and_another_mailboxs_token_still_attaches(
    api, make_token, mailbox_a, mailbox_a2, settings
):
    """One mailbox's agent filled the tenant's whole quota, and every other mailbox's agents
    were refused until retention freed space. Each mailbox now has a share of it."""
    pdfs = [PDF + f"% file {i}\n".encode() * 10 for i in range(3)]
    size = len(pdfs[0])
    settings.TENANT_ATTACHMENT_STORAGE_BYTES = 4 * size
    settings.MAILBOX_ATTACHMENT_STORAGE_SHARE = 0.5
    support = make_token(mailbox_a.tenant, mailboxes=[mailbox_a])
    billing = make_token(mailbox_a.tenant, mailboxes=[mailbox_a2])
    filled = api.post(
        "/drafts",
        draft_body(
            mailbox_a, attachments=[_file("a.pdf", data=pdfs[0]), _file("b.pdf", data=pdfs[1])]
        ),
        token=support,
        key="s1",
    )
    assert filled.status_code == 201, filled.content

    refused = api.post(
        "/drafts",
        draft_body(mailbox_a, attachments=[_file("c.pdf", data=pdfs[2])]),
        token=support,
        key="s2",
    )
    tool = call_tool(
        raw_token=support,
        name="create_draft",
        arguments=draft_body(mailbox_a, attachments=[_file("c.pdf", data=pdfs[2])]),
    )
    other = api.post(
        "/drafts",
        draft_body(mailbox_a2, attachments=[_file("c.pdf", data=pdfs[2])]),
        token=billing,
        key="s3",
    )

    assert refused.status_code == 413
    problem = refused.json()
    assert problem["code"] == "mailbox_storage_quota_exceeded"
    assert (
        problem["mailbox"],
        problem["mailbox_storage_used"],
        problem["mailbox_storage_limit"],
        problem["attachments_bytes"],
    ) == (mailbox_a.address, 2 * size, 2 * size, size)
    assert problem["errors"] == [{"field": "attachments", "message": problem["detail"]}]
    assert f"{2 * size} of {2 * size} bytes are in use" in problem["detail"]
    assert (tool.is_error, tool.document["code"], tool.document["mailbox_storage_limit"]) == (
        True,
        "mailbox_storage_quota_exceeded",
        2 * size,
    )
    assert other.status_code == 201, other.content
    assert Draft.objects.filter(mailbox=mailbox_a).count() == 1


def test_at_the_quota_a_mailbox_token_cannot_learn_which_files_other_mailboxes_hold(
    api, make_token, mailbox_a, mailbox_a2, settings
):
    """Blobs are stored once per tenant, and bytes the tenant holds already cost no quota: at
    the quota's edge, a token limited to one mailbox learnt whether another mailbox's drafts
    (which it cannot read) hold a file, by posting the file (201 if they do, 413 if not). Its
    answer now depends only on the files of its own mailbox's drafts."""
    secret = PDF + b"% the other mailbox's contract\n"
    fresh = PDF + b"% a file nobody holds, as long\n"
    assert len(fresh) == len(secret)
    settings.TENANT_ATTACHMENT_STORAGE_BYTES = len(secret) + 10
    settings.MAILBOX_ATTACHMENT_STORAGE_SHARE = 1
    billing = make_token(mailbox_a.tenant, mailboxes=[mailbox_a2])
    support = make_token(mailbox_a.tenant, mailboxes=[mailbox_a])
    held = api.post(
        "/drafts",
        draft_body(mailbox_a2, attachments=[_file("contract.pdf", data=secret)]),
        token=billing,
        key="x1",
    )
    assert held.status_code == 201, held.content

    guess = api.post(
        "/drafts",
        draft_body(mailbox_a, attachments=[_file("guess.pdf", data=secret)]),
        token=support,
        key="x2",
    )
    control = api.post(
        "/drafts",
        draft_body(mailbox_a, attachments=[_file("guess.pdf", data=fresh)]),
        token=support,
        key="x3",
    )

    assert (guess.status_code, control.status_code) == (413, 413)
    assert guess.json()["detail"] == control.json()["detail"]
    assert Draft.objects.filter(mailbox=mailbox_a).count() == 0


def test_a_revision_keeps_replaces_or_removes_the_files(api, token_a, mailbox_a):
    created = api.post(
        "/drafts", draft_body(mailbox_a, attachments=[_file()]), token=token_a, key="r"
    )
    draft_id = created.json()["id"]
    revision = {
        "to": ["customer@example.com"],
        "subject": "Re: Where is my order?",
        "text": "Revised.",
    }

    kept = api.post(f"/drafts/{draft_id}/versions", revision, token=token_a).json()
    replaced = api.post(
        f"/drafts/{draft_id}/versions",
        {**revision, "attachments": [_file("invoice.pdf", data=PDF + b"% corrected\n")]},
        token=token_a,
    ).json()
    removed = api.post(
        f"/drafts/{draft_id}/versions", {**revision, "attachments": []}, token=token_a
    ).json()

    def files(document):
        return [
            {k: v for k, v in f.items() if k != "id"}
            for f in document["current_version"]["attachments"]
        ]

    first = files(created.json())
    assert files(kept) == first
    assert files(replaced)[0]["sha256"] != first[0]["sha256"]
    assert files(removed) == []
    hashes = {
        v["current_version"]["content_hash"] for v in (created.json(), kept, replaced, removed)
    }
    assert len(hashes) == 4
    assert DraftVersion.objects.filter(draft_id=draft_id).count() == 4


def test_another_tenants_token_gets_404_for_the_draft_and_cannot_revise_its_files(
    api, token_a, token_b, mailbox_a
):
    draft_id = api.post(
        "/drafts", draft_body(mailbox_a, attachments=[_file()]), token=token_a, key="o"
    ).json()["id"]

    read = api.get(f"/drafts/{draft_id}", token=token_b)
    revise = api.post(
        f"/drafts/{draft_id}/versions",
        {"to": ["customer@example.com"], "text": "x", "attachments": []},
        token=token_b,
    )

    assert (read.status_code, revise.status_code) == (404, 404)
    assert DraftVersion.objects.filter(draft_id=draft_id).count() == 1


def test_the_mcp_tool_takes_attachments_with_the_same_checks(token_a, mailbox_a):
    good = call_tool(
        raw_token=token_a,
        name="create_draft",
        arguments=draft_body(mailbox_a, attachments=[_file()]),
    )
    bad = call_tool(
        raw_token=token_a,
        name="create_draft",
        arguments=draft_body(mailbox_a, subject="Other", attachments=[_file("x.vbs")]),
    )

    assert not good.is_error
    assert good.document["current_version"]["attachments"][0]["filename"] == "invoice.pdf"
    assert bad.is_error
    assert bad.document["errors"][0]["field"] == "attachments[0]"
    assert "x.vbs" in bad.document["detail"]


# --- forwarding the customer's files from the message the draft answers ------------------------


def _customer_wrote(sandbox, mailbox, files):
    """An inbound message with ``files`` in the sandbox, and its row in our inbound table."""
    from django.utils import timezone

    from webhooks.models import InboundMessage

    sent = sandbox.inbound(
        mailbox.inbox_id,
        from_="customer@example.com",
        subject="Where is my order?",
        text="See the photo.",
        attachments=files,
    )
    InboundMessage.objects.create(
        tenant=mailbox.tenant,
        mailbox=mailbox,
        thread_id=sent["thread_id"],
        message_id=sent["message_id"],
        sender="customer@example.com",
        subject="Where is my order?",
        received_at=timezone.now(),
    )
    message = sandbox.sdk().inboxes.messages.get(mailbox.inbox_id, sent["message_id"])
    return sent["message_id"], [a.attachment_id for a in message.attachments or []]


def test_a_reply_forwards_the_customers_file_fetched_from_agentmail(
    api, token_a, mailbox_a, sandbox
):
    photo = b"\x89PNG\r\n\x1a\n" + b"customer photo" * 50
    message_id, [photo_id] = _customer_wrote(
        sandbox, mailbox_a, [_file("damage.png", "image/png", photo)]
    )
    body = draft_body(
        mailbox_a, in_reply_to=message_id, attachments=[_file()], forward_attachments=[photo_id]
    )

    response = api.post("/drafts", body, token=token_a, key="fwd-1")

    assert response.status_code == 201, response.content
    files = response.json()["current_version"]["attachments"]
    assert [(f["filename"], f["content_type"]) for f in files] == [
        ("invoice.pdf", "application/pdf"),
        ("damage.png", "image/png"),
    ]
    assert files[1]["sha256"] == hashlib.sha256(photo).hexdigest()
    stored = DraftAttachment.objects.get(filename="damage.png")
    assert bytes(stored.blob.data) == photo


def test_the_idempotency_key_is_checked_before_any_file_is_fetched(
    api, token_a, mailbox_a, sandbox
):
    """A replay answers from the store, and a missing or reused key is refused, with no call to
    AgentMail: the fetch ran before the key's check, so a retry of a completed request failed
    with 502 while AgentMail was down, instead of getting its stored answer."""
    message_id, [photo_id] = _customer_wrote(
        sandbox, mailbox_a, [_file("damage.png", "image/png", b"\x89PNG\r\n\x1a\n" * 40)]
    )
    body = draft_body(mailbox_a, in_reply_to=message_id, forward_attachments=[photo_id])

    def fetches() -> int:
        return len(sandbox.requests(route="get_attachment"))

    first = api.post("/drafts", body, token=token_a, key="fwd-once")
    after_first = fetches()
    sandbox.fault("get_attachment", "503_before", times=10)
    replay = api.post("/drafts", body, token=token_a, key="fwd-once")
    reused = api.post("/drafts", {**body, "subject": "Other"}, token=token_a, key="fwd-once")
    keyless = api.post("/drafts", body, token=token_a)

    assert first.status_code == 201
    assert after_first >= 1
    assert (replay.status_code, replay["Idempotent-Replayed"]) == (201, "true")
    assert replay.json() == first.json()
    assert reused.json()["code"] == "idempotency_key_reused"
    assert keyless.json()["code"] == "idempotency_key_missing"
    assert fetches() == after_first


def test_forwarding_an_unknown_or_a_dangerous_file_is_422_and_writes_nothing(
    api, token_a, mailbox_a, sandbox
):
    message_id, [program_id] = _customer_wrote(
        sandbox, mailbox_a, [_file("totally-a-photo.jpg", "image/jpeg", b"MZ\x90\x00" * 20)]
    )

    unknown = api.post(
        "/drafts",
        draft_body(mailbox_a, in_reply_to=message_id, forward_attachments=["no-such-file"]),
        token=token_a,
        key="fwd-2",
    )
    dangerous = api.post(
        "/drafts",
        draft_body(mailbox_a, in_reply_to=message_id, forward_attachments=[program_id]),
        token=token_a,
        key="fwd-3",
    )
    no_reply = api.post(
        "/drafts",
        draft_body(mailbox_a, forward_attachments=[program_id]),
        token=token_a,
        key="fwd-4",
    )

    assert unknown.status_code == 422
    assert unknown.json()["errors"][0]["field"] == "forward_attachments[0]"
    assert dangerous.status_code == 422
    assert dangerous.json()["code"] == "attachment_type_refused"
    assert "totally-a-photo.jpg" in dangerous.json()["detail"]
    assert no_reply.status_code == 422
    assert no_reply.json()["code"] == "forward_needs_reply"
    assert Draft.objects.count() == 0


@pytest.mark.parametrize("shape", ["walk", "dots"])
def test_an_attachment_id_cannot_walk_to_another_message_of_the_inbox(
    api, token_a, mailbox_a, sandbox, shape
):
    """The id goes into the API path: ``../../<another message>/attachments/<its file>`` once
    made httpx resolve the dots, and the reply to one customer carried another's file (``..``
    alone named the answered message itself)."""
    answered, _ = _customer_wrote(sandbox, mailbox_a, [])
    other, [their_file] = _customer_wrote(
        sandbox, mailbox_a, [_file("passport.png", "image/png", b"\x89PNG\r\n\x1a\n" + b"x" * 64)]
    )
    walk = f"../../{quote(other, safe='@')}/attachments/{their_file}" if shape == "walk" else ".."

    response = api.post(
        "/drafts",
        draft_body(mailbox_a, in_reply_to=answered, forward_attachments=[walk]),
        token=token_a,
        key=f"fwd-{shape}",
    )

    assert response.status_code == 422, response.content
    assert response.json()["code"] == "forward_attachment_unknown"
    assert Draft.objects.count() == 0
    assert not DraftAttachment.objects.exists()


def test_naming_more_files_than_a_draft_may_carry_is_refused_before_any_fetch(
    api, token_a, mailbox_a, sandbox, settings
):
    """A customer's mail with many files, and an agent told to forward them all: every file was
    fetched from AgentMail (the schema takes 100 ids) before the ten-file limit refused the
    draft, each request holding a web or MCP thread (four per process, for every tenant) and
    the bytes in memory meanwhile. Counted with the uploads of the same request."""
    settings.ATTACHMENT_MAX_FILES = 3
    message_id, ids = _customer_wrote(
        sandbox, mailbox_a, [_file(f"page-{n}.txt", "text/plain", b"x" * 100) for n in range(4)]
    )
    before = len(sandbox.requests(route="get_attachment"))

    forwarded = api.post(
        "/drafts",
        draft_body(mailbox_a, in_reply_to=message_id, forward_attachments=ids),
        token=token_a,
        key="fwd-many",
    )
    with_upload = call_tool(
        raw_token=token_a,
        name="create_draft",
        arguments=draft_body(
            mailbox_a, in_reply_to=message_id, attachments=[_file()], forward_attachments=ids[:3]
        ),
    )

    assert forwarded.status_code == 422, forwarded.content
    assert forwarded.json()["code"] == "too_many_attachments"
    assert forwarded.json()["errors"][0]["field"] == "forward_attachments"
    assert with_upload.document["code"] == "too_many_attachments"
    assert len(sandbox.requests(route="get_attachment")) == before
    assert Draft.objects.count() == 0


def test_forwarding_stops_once_the_files_pass_the_drafts_byte_limit(
    api, token_a, mailbox_a, sandbox, settings
):
    """Ten files of the limit per file each were all downloaded before the total per draft
    refused them: the download past what the draft may still carry is cut off instead."""
    settings.ATTACHMENT_MAX_FILE_BYTES = 1000
    settings.ATTACHMENT_MAX_DRAFT_BYTES = 1500
    message_id, ids = _customer_wrote(
        sandbox, mailbox_a, [_file(f"scan-{n}.txt", "text/plain", b"y" * 800) for n in range(4)]
    )
    before = len(sandbox.requests(route="get_attachment"))

    response = api.post(
        "/drafts",
        draft_body(mailbox_a, in_reply_to=message_id, forward_attachments=ids),
        token=token_a,
        key="fwd-budget",
    )

    assert response.status_code == 422, response.content
    assert response.json()["code"] == "attachments_too_large"
    assert response.json()["errors"][0]["field"] == "forward_attachments[1]"
    assert len(sandbox.requests(route="get_attachment")) - before == 2
    assert Draft.objects.count() == 0


def test_forwarding_ends_within_one_calls_time_however_many_files_and_writes_nothing(
    api, token_a, mailbox_a, sandbox, settings
):
    """Each fetch may take a call's whole time (connect + read timeouts); ten files took ten
    times it, past the web server's own timeout, which cut the request off with no answer. All
    the fetches of one request now end within one call's time: here 0.8 s, and AgentMail takes
    0.35 s for each file's details, so the fourth file is never asked for."""
    settings.AGENTMAIL_CONNECT_TIMEOUT = 0.2
    settings.AGENTMAIL_READ_TIMEOUT = 0.6
    message_id, ids = _customer_wrote(
        sandbox, mailbox_a, [_file(f"page-{n}.txt", "text/plain", b"x" * 100) for n in range(4)]
    )
    before = len(sandbox.requests(route="get_attachment"))
    sandbox.fault("get_attachment", "delay", delay=0.35, times=0)

    started = time.monotonic()
    response = api.post(
        "/drafts",
        draft_body(mailbox_a, in_reply_to=message_id, forward_attachments=ids),
        token=token_a,
        key="fwd-slow",
    )
    took = time.monotonic() - started
    sandbox.clear_faults()

    assert response.status_code == 502, response.content
    assert response.json()["code"] == "provider_unavailable"
    # The file whose fetch the time ran out on (the third, unless the machine is slow).
    assert response.json()["errors"][0]["field"] in {f"forward_attachments[{n}]" for n in range(3)}
    assert len(sandbox.requests(route="get_attachment")) - before < len(ids)
    assert took < 10
    assert Draft.objects.count() == 0


def test_a_look_alike_dot_is_refused_uploaded_or_forwarded_naming_the_character(
    api, token_a, mailbox_a, sandbox
):
    """A name with U+FF0E (a fullwidth full stop) for its dot shows as invoice.exe but had no
    extension for the check to refuse: taken from an agent and from a customer's message alike."""
    spoof = "invoice\uff0eexe"
    message_id, [spoof_id] = _customer_wrote(
        sandbox, mailbox_a, [_file(spoof, "application/pdf", PDF)]
    )

    uploaded = api.post(
        "/drafts",
        draft_body(mailbox_a, attachments=[_file(spoof)]),
        token=token_a,
        key="lookalike-1",
    )
    forwarded = api.post(
        "/drafts",
        draft_body(mailbox_a, in_reply_to=message_id, forward_attachments=[spoof_id]),
        token=token_a,
        key="lookalike-2",
    )

    said = 'U+FF0E (FULLWIDTH FULL STOP), which reads as "."'
    assert [uploaded.status_code, forwarded.status_code] == [422, 422]
    assert [uploaded.json()["code"], forwarded.json()["code"]] == [
        "attachment_filename_invalid"
    ] * 2
    assert said in uploaded.json()["detail"]
    assert said in forwarded.json()["detail"]
    assert Draft.objects.count() == 0
    assert AttachmentBlob.objects.count() == 0


def test_a_filename_windows_cannot_save_is_refused_uploaded_and_renamed_forwarded(
    api, token_a, mailbox_a, sandbox
):
    """'"', "<", ">", "|", "?", "*" and ":" were taken in a name: no one could save the file
    under it, and 'x.exe"; filename="invoice.pdf' was safe only while AgentMail quoted it in the
    MIME header. The agent renames its own file; a customer's file, forwarded back to them, is
    sent with each such character written "_", as browsers save a download so."""
    customers = "Q3 report: final? <v2>.pdf"
    message_id, [file_id] = _customer_wrote(
        sandbox, mailbox_a, [_file(customers, "application/pdf", PDF)]
    )

    uploaded = api.post(
        "/drafts",
        draft_body(mailbox_a, attachments=[_file('x.exe"; filename="invoice.pdf')]),
        token=token_a,
        key="win-1",
    )
    forwarded = api.post(
        "/drafts",
        draft_body(mailbox_a, in_reply_to=message_id, forward_attachments=[file_id]),
        token=token_a,
        key="win-2",
    )

    problem = uploaded.json()
    assert uploaded.status_code == 422, uploaded.content
    assert problem["code"] == "attachment_filename_invalid"
    assert problem["errors"][0]["field"] == "attachments[0]"
    assert 'x.exe"; filename="invoice.pdf' in problem["detail"]
    assert 'contains ", which no Windows file name may hold' in problem["detail"]
    assert forwarded.status_code == 201, forwarded.content
    [sent] = forwarded.json()["current_version"]["attachments"]
    assert sent["filename"] == "Q3 report_ final_ _v2_.pdf"
    assert DraftAttachment.objects.get().filename == "Q3 report_ final_ _v2_.pdf"
