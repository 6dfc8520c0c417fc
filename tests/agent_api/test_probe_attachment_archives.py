"""Probe: a ZIP whose member Windows saves as a program under another name.

The filename rules refuse "invoice.exe." and "invoice.exe::$DATA" for the attachment itself
(Windows saves both as invoice.exe); the archive check read each member's extension as written,
so "invoice.exe." or "invoice.exe " inside a ZIP passed, and Explorer extracts it as invoice.exe.
A ZIP with bytes before it (a self-extractor's layout, which 7-Zip and WinRAR open as the
archive) was not looked into at all."""

from __future__ import annotations

import base64
import gzip
import io
import tarfile
import zipfile

import pytest

from intents.models import AttachmentBlob, Draft
from tests.agent_api.conftest import draft_body

pytestmark = pytest.mark.django_db


def _zip(member: str, prefix: bytes = b"") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("readme.txt", "hello")
        archive.writestr(member, b"MZ\x90\x00")
    return prefix + buffer.getvalue()


def _zip_named_otherwise_in_its_local_header() -> bytes:
    """The directory says invoice.pdf; the local header, which streaming extractors read, says
    invoice.exe."""
    data = _zip("invoice.pdf")
    at = data.index(b"invoice.pdf")
    return data[:at] + b"invoice.exe" + data[at + len("invoice.pdf") :]


@pytest.mark.parametrize(
    "data",
    [
        _zip("invoice.exe."),
        _zip("invoice.exe "),
        _zip("docs/invoice.exe. . "),
        _zip("invoice.exe::$DATA"),
        _zip("docs\\invoice.exe."),
        _zip("invoice.exe", prefix=b"%PDF-1.4\n" + b"x" * 100),
        _zip_named_otherwise_in_its_local_header(),
    ],
    ids=[
        "trailing-dot",
        "trailing-space",
        "dots-and-spaces",
        "stream",
        "backslash",
        "prefixed",
        "local-header",
    ],
)
def test_a_zip_holding_a_program_by_its_windows_name_is_refused(api, token_a, mailbox_a, data):
    upload = {
        "filename": "statements.zip",
        "content_type": "application/zip",
        "content": base64.b64encode(data).decode(),
    }

    response = api.post(
        "/drafts", draft_body(mailbox_a, attachments=[upload]), token=token_a, key="z"
    )

    assert response.status_code == 422, response.content
    problem = response.json()
    assert problem["code"] == "attachment_type_refused"
    assert problem["errors"][0]["field"] == "attachments[0]"
    assert Draft.objects.count() == 0
    assert AttachmentBlob.objects.count() == 0


def test_a_zip_of_harmless_files_still_passes(api, token_a, mailbox_a):
    upload = {
        "filename": "statements.zip",
        "content_type": "application/zip",
        "content": base64.b64encode(_zip("march. statement.pdf")).decode(),
    }

    response = api.post(
        "/drafts", draft_body(mailbox_a, attachments=[upload]), token=token_a, key="z"
    )

    assert response.status_code == 201, response.content


def _tgz(member: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo(member)
        info.size = 4
        archive.addfile(info, io.BytesIO(b"MZ\x90\x00"))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("filename", "data", "named"),
    [
        ("invoice.tgz", _tgz("invoice.exe"), '"invoice.exe" in "invoice.tar"'),
        ("invoice.pdf.gz", gzip.compress(b"MZ\x90\x00"), '"invoice.pdf"'),
    ],
    ids=["tgz", "gz"],
)
def test_a_program_in_a_tar_or_compressed_is_refused_naming_the_member(
    api, token_a, mailbox_a, filename, data, named
):
    """An outside probe: only ZIPs were looked into, so invoice.tgz holding invoice.exe, or a
    program gzipped under a .pdf name, was approved and then bounced by the recipient's
    provider (Gmail refuses a blocked type inside .tgz or compressed as .gz) or delivered."""
    upload = {
        "filename": filename,
        "content_type": "application/gzip",
        "content": base64.b64encode(data).decode(),
    }

    response = api.post(
        "/drafts", draft_body(mailbox_a, attachments=[upload]), token=token_a, key="t"
    )

    assert response.status_code == 422, response.content
    problem = response.json()
    assert problem["code"] == "attachment_type_refused"
    assert problem["errors"][0]["field"] == "attachments[0]"
    assert named in problem["detail"]
    assert (Draft.objects.count(), AttachmentBlob.objects.count()) == (0, 0)
