"""Outside probe: what follows a ZIP's end. zipfile tolerates bytes after the end-of-central-
directory record and reads the last record it finds, while 7-Zip and WinRAR look for an archive
at the end of a file: a second ZIP there (or in the comment) is one some tools open. Refused,
with its own reason; a ZIP with a plain comment passes. No database: the pure checks."""

from __future__ import annotations

import pytest

from intents import errors
from intents.attachments import Upload, clean_upload
from tests.intents.helpers import zip_of

PROGRAM = b"MZ\x90\x00" + bytes(60)
TEXT = b"Order 1042: two chairs, one table.\n"
ZIP_TAIL = (
    "a ZIP with more than itself: another ZIP before it, bytes after its end, or ZIP records "
    "in its comment (7-Zip and WinRAR open an archive found there)"
)


def _refusal(data: bytes) -> str:
    with pytest.raises(errors.InvalidInput) as refused:
        clean_upload(0, Upload("notes.zip", "application/zip", data))
    return refused.value.message


@pytest.mark.parametrize(
    "data",
    [
        zip_of("readme.txt", TEXT) + zip_of("setup.exe", PROGRAM),
        zip_of("readme.txt", TEXT, comment=zip_of("setup.exe", PROGRAM)),
        zip_of("readme.txt", TEXT) + b"tail",
        zip_of("readme.txt", TEXT) + bytes(10),
        zip_of("readme.txt", TEXT, comment=b"release notes")[:-3],
    ],
    ids=["zip-after-zip", "zip-in-comment", "tail", "zeros", "comment-cut"],
)
def test_a_zip_with_more_than_itself_is_refused(data):
    assert _refusal(data) == (
        f'attachments[0] "notes.zip": the content is {ZIP_TAIL}, which is refused.'
    )


def test_a_zip_with_a_comment_passes():
    data = zip_of("readme.txt", TEXT, comment=b"release notes, 3 Dec")

    assert clean_upload(0, Upload("notes.zip", "application/zip", data)).filename == "notes.zip"


def test_a_comment_holding_a_bare_end_record_is_refused_as_damaged():
    """zipfile reads the last end record it finds, the comment's, and cannot read on."""
    data = zip_of("readme.txt", TEXT, comment=b"see PK\x05\x06 here")

    assert "a damaged or truncated archive" in _refusal(data)
