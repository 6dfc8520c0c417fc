"""Outside probe: one archive budget per draft, not per file. Each file had its own (10,000
members, 64 inner archives, 16 MiB unpacked), so an agent posting ten tar.gz files of 9,999 pax
members each made one request cost 6.4 s of CPU, well within each
file's own limits. The files of one version, uploaded and forwarded alike, now share one
budget; past it the file where it ran out is refused, with a 422 naming it and nothing
stored."""

from __future__ import annotations

import io
import tarfile

import pytest

from intents.archives import MEMBERS_MAX
from intents.models import AttachmentBlob, Draft
from tests.agent_api.conftest import draft_body
from tests.agent_api.test_attachments import _customer_wrote, _file

pytestmark = pytest.mark.django_db

PER_FILE = MEMBERS_MAX // 4 + 1
OVER_DRAFT = "with the draft's other files, holds more than can be looked inside"


def _tar_gz(count: int, tag: str) -> bytes:
    """``count`` empty files whose names are not ASCII, so each has a pax header."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as archive:
        for number in range(count):
            archive.addfile(tarfile.TarInfo(f"{tag}-{number:05d}-übersicht.txt"))
    return buffer.getvalue()


def test_files_each_within_the_budget_are_refused_together_past_it(api, token_a, mailbox_a):
    files = [
        _file(f"logs{n}.tar.gz", "application/gzip", _tar_gz(PER_FILE, f"f{n}")) for n in range(5)
    ]

    response = api.post(
        "/drafts", draft_body(mailbox_a, attachments=files), token=token_a, key="budget"
    )

    assert response.status_code == 422, response.content
    problem = response.json()
    assert problem["code"] == "attachment_type_refused"
    assert [e["field"] for e in problem["errors"]] == ["attachments[3]"]
    assert '"logs3.tar.gz"' in problem["detail"]
    assert OVER_DRAFT in problem["detail"]
    assert (Draft.objects.count(), AttachmentBlob.objects.count()) == (0, 0)


def test_three_such_files_pass(api, token_a, mailbox_a):
    files = [
        _file(f"logs{n}.tar.gz", "application/gzip", _tar_gz(PER_FILE, f"f{n}")) for n in range(3)
    ]

    response = api.post(
        "/drafts", draft_body(mailbox_a, attachments=files), token=token_a, key="budget-ok"
    )

    assert response.status_code == 201, response.content


def test_a_forwarded_file_shares_the_budget_of_the_uploaded_ones(api, token_a, mailbox_a, sandbox):
    message_id, [file_id] = _customer_wrote(
        sandbox,
        mailbox_a,
        [_file("customer.tar.gz", "application/gzip", _tar_gz(PER_FILE * 2, "c"))],
    )
    uploaded = [
        _file(f"logs{n}.tar.gz", "application/gzip", _tar_gz(PER_FILE, f"f{n}")) for n in range(2)
    ]
    body = draft_body(
        mailbox_a, attachments=uploaded, in_reply_to=message_id, forward_attachments=[file_id]
    )

    response = api.post("/drafts", body, token=token_a, key="budget-forwarded")

    assert response.status_code == 422, response.content
    problem = response.json()
    assert [e["field"] for e in problem["errors"]] == ["forward_attachments[0]"]
    assert OVER_DRAFT in problem["detail"]
    assert (Draft.objects.count(), AttachmentBlob.objects.count()) == (0, 0)
