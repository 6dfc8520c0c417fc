"""Disk images as attachments: Windows mounts an .iso, .img or .vhd on a double-click and shows
the programs inside without the mark of the web, so they deliver malware past the checks on
the programs themselves; Gmail refuses them, as it does the names below. The policy of
intents.attachments is what Gmail's and Outlook's lists refuse, yet an agent could attach
``invoice.iso`` holding setup.exe (its contents are no ZIP, so nothing looked inside) and a
reviewer saw a file named like any other."""

from __future__ import annotations

import io
import zipfile

import pytest

from intents import errors
from intents.attachments import Upload, clean_upload

SECTOR = 2048


def _iso(identifier: bytes = b"CD001") -> bytes:
    """The first volume descriptor of an ISO 9660 (or UDF) image after its 16 system sectors,
    then the sector of a small program."""
    descriptor = b"\x01" + identifier + b"\x01" + bytes(SECTOR - 7)
    return bytes(16 * SECTOR) + descriptor + b"MZ\x90\x00".ljust(SECTOR, b"\x00")


def _vhd() -> bytes:
    """A fixed VHD: the disk's bytes, then a 512-byte footer that starts with its cookie."""
    return bytes(4 * SECTOR) + b"conectix".ljust(512, b"\x00")


def _zipped(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "filename",
    [
        "invoice.iso",
        "invoice.IMG",
        "setup.ex_",
        "setup.ex",
        "check.diagcfg",
        "check.diagpkg",
        "check.diagpack",
        "module.mjs",
    ],
)
def test_names_gmail_refuses_are_refused(filename):
    with pytest.raises(errors.InvalidInput) as refused:
        clean_upload(0, Upload(filename, "application/octet-stream", b"hello"))

    assert refused.value.code == "attachment_type_refused"


@pytest.mark.parametrize(
    ("filename", "content_type", "data"),
    [
        ("invoice.pdf", "application/pdf", _iso()),
        ("scan.pdf", "application/pdf", _iso(b"BEA01")),
        ("disk.bin", "application/octet-stream", _vhd()),
        ("disk.bin", "application/octet-stream", b"vhdxfile" + bytes(600)),
    ],
)
def test_a_disk_image_under_any_name_is_refused_by_its_bytes(filename, content_type, data):
    with pytest.raises(errors.InvalidInput) as refused:
        clean_upload(0, Upload(filename, content_type, data))

    assert refused.value.code == "attachment_type_refused"
    assert "disk image" in refused.value.message


@pytest.mark.parametrize(
    ("filename", "content_type", "data"),
    [
        ("documents.zip", "application/zip", _zipped("invoice.iso", _iso())),
        ("disk.bin", "application/x-iso9660-image", b"hello"),
    ],
)
def test_a_disk_image_in_an_archive_or_declared_as_one_is_refused(filename, content_type, data):
    with pytest.raises(errors.InvalidInput) as refused:
        clean_upload(0, Upload(filename, content_type, data))

    assert refused.value.code == "attachment_type_refused"


def test_a_text_that_says_cd001_where_a_volume_would_is_kept():
    data = b"%PDF-1.4\n".ljust(16 * SECTOR, b" ") + b"\x01CD001 and conectix vhdxfile"

    assert clean_upload(0, Upload("notes.pdf", "application/pdf", data)).sha256
