"""Outside probe: a ZIP read two ways. The check listed a ZIP's files from its central directory
(as Python's zipfile, 7-Zip and Explorer do), while streaming extractors (libarchive's bsdtar
reading a pipe, Java's ZipInputStream, mail scanners that read as the bytes arrive) walk the
local file headers from the start. A ZIP whose local header named ``notes.exe`` where the
directory said ``notes.txt``, or that held a local entry the directory does not list, passed,
and what those tools extract is the program nobody was shown. No database: the pure checks."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import pytest

from intents import errors
from intents.attachments import Upload, clean_upload

PROGRAM = b"MZ\x90\x00" + bytes(60)
TEXT = b"Order 1042: two chairs, one table.\n"
DISAGREE = (
    "a ZIP whose file headers do not match its directory (a file named otherwise, or one it "
    "does not list)"
)


def _zipped(*members: tuple[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return buffer.getvalue()


def _renamed_in_local_header(data: bytes, name: str, local: str) -> bytes:
    """``data`` with the local header of ``name`` saying ``local`` (same length); the central
    directory still says ``name``."""
    at = data.index(name.encode())
    assert data[at - 30 : at - 26] == b"PK\x03\x04"
    return data[:at] + local.encode() + data[at + len(name) :]


def _hiding_the_first_entry(data: bytes) -> bytes:
    """``data`` with its first file left out of the central directory, its local entry kept."""
    archive = zipfile.ZipFile(io.BytesIO(data))
    start = archive.start_dir
    second = data.index(b"PK\x01\x02", start + 1)
    end = data.rindex(b"PK\x05\x06")
    directory = data[second:end]
    record = bytearray(data[end:])
    count = len(archive.infolist()) - 1
    struct.pack_into("<HHII", record, 8, count, count, len(directory), start)
    return data[:start] + directory + bytes(record)


class _Unseekable(io.RawIOBase):
    """What zipfile writes to a pipe: each file followed by a data descriptor (flag bit 3)."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.buffer += data
        return len(data)


def _streamed(*members: tuple[str, bytes]) -> bytes:
    out = _Unseekable()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            with archive.open(name, "w") as member:
                member.write(data)
    return bytes(out.buffer)


def _refusal(filename: str, data: bytes) -> str:
    with pytest.raises(errors.InvalidInput) as refused:
        clean_upload(0, Upload(filename, "application/zip", data))
    assert refused.value.code == "attachment_type_refused"
    return refused.value.message


def _passes(filename: str, data: bytes) -> bool:
    return clean_upload(0, Upload(filename, "application/zip", data)).sha256 != ""


def test_a_zip_whose_local_header_names_a_program_the_directory_does_not_is_refused():
    data = _renamed_in_local_header(
        _zipped(("readme.txt", TEXT), ("notes.txt", PROGRAM)), "notes.txt", "notes.exe"
    )
    assert zipfile.ZipFile(io.BytesIO(data)).namelist() == ["readme.txt", "notes.txt"]

    assert _refusal("docs.zip", data) == (
        f'attachments[0] "docs.zip": the content is {DISAGREE}, which is refused.'
    )


def test_a_local_entry_the_directory_does_not_list_is_refused():
    data = _hiding_the_first_entry(_zipped(("setup.exe", PROGRAM), ("notes.txt", TEXT)))
    assert zipfile.ZipFile(io.BytesIO(data)).namelist() == ["notes.txt"]

    assert _refusal("docs.zip", data) == (
        f'attachments[0] "docs.zip": the content is {DISAGREE}, which is refused.'
    )


def test_a_zip_inside_an_archive_whose_headers_disagree_is_refused_naming_it():
    inner = _renamed_in_local_header(_zipped(("notes.txt", PROGRAM)), "notes.txt", "notes.exe")

    assert _refusal("docs.zip", _zipped(("readme.txt", TEXT), ("inner.zip", inner))) == (
        f'attachments[0] "docs.zip": the content is {DISAGREE} ("inner.zip"), which is refused.'
    )


def test_a_zip_behind_other_bytes_whose_headers_disagree_is_refused():
    data = b"%PDF-1.4\n" + _renamed_in_local_header(
        _zipped(("notes.txt", PROGRAM)), "notes.txt", "notes.exe"
    )

    assert DISAGREE in _refusal("statement.pdf", data)


@pytest.mark.parametrize(
    "data",
    [
        _streamed(("a.txt", TEXT), ("b/c.csv", TEXT * 50), ("empty.txt", b"")),
        b"%PDF-1.4\n" + _zipped(("a.txt", TEXT)),
        _zipped(("caf\u00e9.txt", TEXT), ("dir/", b""), ("z.txt", TEXT)),
    ],
    ids=["data-descriptors", "prefixed", "utf8-and-directory"],
)
def test_zips_whose_headers_agree_still_pass(data):
    assert _passes("docs.zip", data)


def _with_unicode_path(name: str, unicode_path: str, data: bytes) -> bytes:
    """A ZIP of one file whose header says ``name`` and whose Info-ZIP Unicode Path field
    (0x7075, with the CRC of the header's name) says ``unicode_path``: zipfile, 7-Zip and unzip
    take the latter, Explorer's built-in ZIP folder and Java's ZipInputStream the former."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo(name)
        utf8 = unicode_path.encode()
        info.extra = struct.pack("<HHBI", 0x7075, 5 + len(utf8), 1, zlib.crc32(name.encode()))
        info.extra += utf8
        archive.writestr(info, data)
    return buffer.getvalue()


TWO_NAMES = "a ZIP that gives a file two names of different types (its own and its Unicode path)"


def test_a_zip_whose_unicode_path_hides_a_program_behind_another_type_is_refused():
    data = _with_unicode_path("setup.exe", "notes.txt", PROGRAM)
    assert zipfile.ZipFile(io.BytesIO(data)).namelist() == ["notes.txt"]

    assert _refusal("docs.zip", data) == (
        f'attachments[0] "docs.zip": the content is {TWO_NAMES} ("notes.txt"), which is refused.'
    )


def test_a_unicode_path_that_only_spells_the_name_in_utf8_passes():
    """What Info-ZIP writes for a name outside ASCII: the header in code page 437, the Unicode
    path in UTF-8; the two differ, the type does not."""
    assert _passes("docs.zip", _with_unicode_path("caf\u00c9.txt", "caf\u00e9.txt", TEXT))
