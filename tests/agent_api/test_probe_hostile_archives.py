"""Outside probe: hostile archives from both ends, an agent's upload and a customer's file the
agent forwards. Each is refused whole (422 naming the field, nothing stored) and none is a 500:
a ZIP whose local header names a program its directory does not, bytes behind a bzip2 stream,
a tar whose pax headers chain past Python's recursion limit. Names tools all cut at a NUL are
checked as cut ("setup.exe\\0.txt" is setup.exe to tarfile, zipfile, GNU tar and 7-Zip)."""

from __future__ import annotations

import bz2
import io
import tarfile
import zipfile

import pytest

from intents.models import AttachmentBlob, Draft
from tests.agent_api.conftest import draft_body
from tests.agent_api.test_attachments import _customer_wrote, _file
from tests.intents.helpers import zip_of

pytestmark = pytest.mark.django_db

PROGRAM = b"MZ\x90\x00" + bytes(60)
TEXT = b"Order 1042: two chairs, one table.\n"


def _zip_named_otherwise_locally() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("readme.txt", TEXT)
        archive.writestr("photo.jpg", PROGRAM)
    data = buffer.getvalue()
    at = data.index(b"photo.jpg")
    return data[:at] + b"photo.exe" + data[at + len("photo.jpg") :]


def _pax_chain(links: int) -> bytes:
    """``links`` pax extended headers in a row, then one empty file: tarfile reads each by
    recursion."""
    record = b"20 comment=abcdefgh\n"
    header = tarfile.TarInfo("pax")
    header.type = tarfile.XHDTYPE
    header.size = len(record)
    block = header.tobuf(tarfile.USTAR_FORMAT) + record + bytes(512 - len(record))
    return block * links + tarfile.TarInfo("a.txt").tobuf(tarfile.USTAR_FORMAT) + bytes(1024)


def _tar_of(name: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        info = tarfile.TarInfo(name)
        info.size = len(PROGRAM)
        archive.addfile(info, io.BytesIO(PROGRAM))
    return buffer.getvalue()


ZIP_TAIL = "a ZIP with more than itself"
HOSTILE = [
    ("photos.zip", _zip_named_otherwise_locally(), "file headers do not match its directory"),
    (
        "notes.txt.bz2",
        bz2.compress(TEXT) + b"not a stream",
        "a damaged or truncated archive",
    ),
    ("logs.tar", _pax_chain(1500), "a damaged or truncated archive"),
    ("logs.tar", _tar_of("setup.exe\x00.txt"), '("setup.exe")'),
    ("notes.zip", zip_of("readme.txt", TEXT) + zip_of("setup.exe", PROGRAM), ZIP_TAIL),
    ("notes.zip", zip_of("readme.txt", TEXT, comment=zip_of("setup.exe", PROGRAM)), ZIP_TAIL),
    ("notes.zip", zip_of("readme.txt", TEXT) + b"tail", ZIP_TAIL),
]
IDS = [
    "zip-local-header",
    "bz2-trailing",
    "pax-chain",
    "tar-nul",
    "zip-after-zip",
    "zip-in-comment",
    "zip-tail",
]


@pytest.mark.parametrize(("filename", "data", "said"), HOSTILE, ids=IDS)
def test_an_agents_hostile_archive_is_refused_whole(api, token_a, mailbox_a, filename, data, said):
    body = draft_body(mailbox_a, attachments=[_file(filename, "application/octet-stream", data)])

    response = api.post("/drafts", body, token=token_a, key="hostile-archive")

    assert response.status_code == 422, response.content
    problem = response.json()
    assert problem["code"] == "attachment_type_refused"
    assert [e["field"] for e in problem["errors"]] == ["attachments[0]"]
    assert said in problem["detail"]
    assert (Draft.objects.count(), AttachmentBlob.objects.count()) == (0, 0)


@pytest.mark.parametrize(("filename", "data", "said"), HOSTILE, ids=IDS)
def test_a_customers_hostile_archive_forwarded_is_refused_whole(
    api, token_a, mailbox_a, sandbox, filename, data, said
):
    message_id, [file_id] = _customer_wrote(
        sandbox, mailbox_a, [_file(filename, "application/octet-stream", data)]
    )
    body = draft_body(mailbox_a, in_reply_to=message_id, forward_attachments=[file_id])

    response = api.post("/drafts", body, token=token_a, key="forwarded-archive")

    assert response.status_code == 422, response.content
    problem = response.json()
    assert problem["code"] == "attachment_type_refused"
    assert [e["field"] for e in problem["errors"]] == ["forward_attachments[0]"]
    assert said in problem["detail"]
    assert (Draft.objects.count(), AttachmentBlob.objects.count()) == (0, 0)
