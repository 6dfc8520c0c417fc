"""What an attachment holds if it is an archive or a compressed file: one walker for every kind
the standard library reads, within one budget. Pure and without policy: it lists members (and
what a compressed file unpacks to); ``intents.attachments`` decides what is refused.

Read: ZIP (Office documents are ZIPs), tar (ustar, GNU and pax by their magic, an old v7 tar by
its ``.tar`` name), and the single-file compressors gzip, bzip2 and xz (lzma), each wrapping
anything else (``.tar.gz``, ``.tgz``, a ``.gz`` inside a ZIP). A compressed file is one member:
the name it unpacks to (the file's name without its suffix, and the gzip header's own name when
there is one, since 7-Zip and ``gunzip -N`` use that) and its bytes.

Inside a ZIP or tar, a member whose name says it is an archive or compressed is opened in turn
(names first, for the whole archive, then the inner archives), ``ARCHIVE_DEPTH`` levels down; a
compression layer over an archive (the ``.gz`` of a ``.tar.gz``) is not a level of its own.
One budget (``Budget``) covers all the files of one draft, however they nest: at most
``INNER_ARCHIVES_MAX`` archives opened or files decompressed, ``INNER_ARCHIVE_MAX_BYTES``
unpacked among them all (never more is decompressed: each read stops one byte past what is
left), ``MEMBERS_MAX`` members listed. Past a bound the walk stops with ``Refused``
(``TOO_DEEP``, or ``OVER_DRAFT`` once earlier files spent part of it). A budget per file let
ten files of 9,999 members each cost one request 6.4 s of CPU.

Refused unread (``Refused``), because what cannot be looked inside is where a program is hidden
from mail filters: an inner archive that cannot be read (encrypted, damaged), and a damaged or
truncated archive or compressed file (a tar with bytes after its last member that no header
explains is one: GNU tar skips to the next header where Python's stops, so a program could sit
past the stop). An encrypted ZIP itself still lists its names, which are checked like any ZIP's.
A ZIP whose local file headers (what streaming extractors read) do not tell of the files its
central directory lists (what the walk reads) is refused as well (``HEADERS_DISAGREE``), and
so is one that names a file two ways of different types, by its header and by its Unicode Path
field (``TWO_NAMES``): extractors differ on which they take. So is a ZIP with more than
itself (``ZIP_TAIL``): bytes after its end record other than its declared comment, ZIP records
in that comment, or a whole ZIP in front of it; zipfile reads the last end record it finds,
7-Zip and WinRAR look for an archive at the end of a file.

7z, RAR and the other kinds the standard library cannot read (``SEALED_EXTENSIONS``, by name, and
7z, RAR and Zstandard by their first bytes) are refused at every level, not let through unread:
nothing could be said of what they hold, as of an encrypted ZIP inside a ZIP, which the checks
already refused; and a reviewer approving one would approve files nobody saw. A ZIP holding the
same files can be sent instead.

Links and devices in a tar or ZIP are listed with their kind, for the caller to refuse. Names
with absolute paths or ``..`` are listed as written: the caller checks the name a member is saved
as (``saved_as``: its last component), as for any ZIP.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import re
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

ARCHIVE_DEPTH = 3
INNER_ARCHIVES_MAX = 64
INNER_ARCHIVE_MAX_BYTES = 16 * 1024 * 1024
MEMBERS_MAX = 10_000
# What the xz decoder may allocate: `xz -9` needs 65 MiB; a header may ask for 1.5 GiB.
LZMA_MEMORY_MAX = 80 * 1024 * 1024

# The single-file compressors, by suffix, and the suffix of what they unpack to: report.pdf.gz
# holds report.pdf, docs.tgz holds docs.tar.
COMPRESSED_SUFFIXES = {
    "gz": "",
    "bz2": "",
    "xz": "",
    "lzma": "",
    "tgz": ".tar",
    "taz": ".tar",
    "tbz": ".tar",
    "tbz2": ".tar",
    "tb2": ".tar",
    "txz": ".tar",
}
READABLE_EXTENSIONS = frozenset({"zip", "tar", *COMPRESSED_SUFFIXES})
# Archives and compressors the standard library cannot read (7-Zip and WinRAR open them all, and
# Windows 11 itself opens 7z, RAR and .tar.zst): refused, whatever they hold.
SEALED_EXTENSIONS = frozenset(
    {"7z", "rar", "ace", "arj", "lzh", "lha", "zst", "tzst", "lz", "lz4", "z"}
)
SEALED_MAGIC = (b"7z\xbc\xaf\x27\x1c", b"Rar!\x1a\x07", b"\x28\xb5\x2f\xfd")
SEALED_KINDS = "7z, RAR and the like"

TOO_DEEP = "an archive nested too deep or too large to look inside"
OVER_DRAFT = (
    "an archive that, with the draft's other files, holds more than can be looked inside "
    f"(all of a draft's files together: at most {MEMBERS_MAX} members, {INNER_ARCHIVES_MAX} "
    f"inner archives and {INNER_ARCHIVE_MAX_BYTES} bytes unpacked)"
)
DAMAGED = "a damaged or truncated archive or compressed file"
SEALED = f"an archive of a kind whose files cannot be checked ({SEALED_KINDS})"
HEADERS_DISAGREE = (
    "a ZIP whose file headers do not match its directory (a file named otherwise, or one it "
    "does not list)"
)
ZIP_TAIL = (
    "a ZIP with more than itself: another ZIP before it, bytes after its end, or ZIP records "
    "in its comment (7-Zip and WinRAR open an archive found there)"
)
TWO_NAMES = "a ZIP that gives a file two names of different types (its own and its Unicode path)"
UNREADABLE_INNER = (
    "an archive holding an archive that cannot be looked inside "
    f"(encrypted, damaged, or {SEALED_KINDS})"
)

# What parsing or decompressing hostile bytes may raise (the modules' own errors and their codecs').
_UNREADABLE = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    tarfile.TarError,
    RuntimeError,  # an encrypted ZIP member
    NotImplementedError,  # a compression method zipfile has no codec for (AES: 99)
    zlib.error,
    lzma.LZMAError,
    EOFError,  # a compressed stream cut short
    OSError,  # gzip.BadGzipFile, bz2's invalid data
    ValueError,
    OverflowError,
)


@dataclass(frozen=True)
class Member:
    """One file an archive holds. ``path``: the names from the outermost archive's member to
    this one; ``kind``: file, directory, link or device; ``data``: what a compressed file
    unpacks to (the member of a .gz), for its first bytes to be checked; ``compressed``: the
    member is the content of a compressed file."""

    path: tuple[str, ...]
    kind: str = "file"
    data: bytes | None = None
    compressed: bool = False


class Refused(Exception):
    """The walk stopped: ``what`` says why, ``path`` names the member at fault (empty: the file
    itself)."""

    def __init__(self, what: str, path: tuple[str, ...] = ()):
        super().__init__(what)
        self.what = what
        self.path = path


@dataclass
class Budget:
    """What may still be looked inside: one for all the files of a draft (``members`` takes
    one). ``shared``: earlier files spent part of it, so running out is the draft's doing."""

    archives_left: int = INNER_ARCHIVES_MAX
    bytes_left: int = INNER_ARCHIVE_MAX_BYTES
    members_left: int = MEMBERS_MAX
    shared: bool = False

    def take(self, path: tuple[str, ...], *, archives: int = 0, size: int = 0, members: int = 0):
        self.archives_left -= archives
        self.bytes_left -= size
        self.members_left -= members
        if min(self.archives_left, self.bytes_left, self.members_left) < 0:
            raise Refused(OVER_DRAFT if self.shared else TOO_DEEP, path)

    def start_file(self) -> None:
        self.shared = self.shared or self != Budget()


def extension(name: str) -> str:
    return name.rsplit(".", 1)[1].lower() if "." in name else ""


def saved_as(member: str) -> str:
    """The name Windows gives an archive member when it is extracted: the last path component
    (either separator), before any ":" (a stream: "invoice.exe::$DATA" is invoice.exe), without
    trailing dots and spaces ("invoice.exe. " is saved as invoice.exe): the tricks the filename
    rules refuse for the attachment itself."""
    return re.split(r"[/\\]", member)[-1].split(":", 1)[0].rstrip(". ")


def members(data: bytes, name: str, budget: Budget | None = None) -> Iterator[Member]:
    """Every member of ``data`` (named ``name``) if it is an archive or compressed, inner
    archives' members too; nothing if it is neither. Raises ``Refused`` where it stops.
    ``budget``: what the draft's earlier files left (a fresh one if None)."""
    budget = budget or Budget()
    budget.start_file()
    yield from _walk(data, name, path=(), depth=0, budget=budget, opened=False)


def _kind(data: bytes, name: str) -> str | None:
    if data.startswith(b"\x1f\x8b\x08"):
        return "gz"
    # "BZh", the block size, then the magic of a block or of the end of the stream.
    if data[:3] == b"BZh" and data[4:10] in (b"1AY&SY", b"\x17rE8P\x90"):
        return "bz2"
    if data.startswith(b"\xfd7zXZ\x00") or extension(saved_as(name)) == "lzma":
        return "xz"
    if data.startswith(SEALED_MAGIC):
        return "sealed"
    # Before the ZIP test: a tar holding a ZIP ends with that ZIP's directory.
    if data[257:263] in (b"ustar\x00", b"ustar ") or extension(saved_as(name)) == "tar":
        return "tar"
    # Not only a ZIP that starts the file: 7-Zip and WinRAR open one found at the end of any
    # bytes (a self-extractor's layout), which is where a ZIP's directory is read from.
    if data.startswith(b"PK\x03\x04") or zipfile.is_zipfile(io.BytesIO(data)):
        return "zip"
    return None


def _walk(
    data: bytes,
    name: str,
    *,
    path: tuple[str, ...],
    depth: int,
    budget: Budget,
    opened: bool,
) -> Iterator[Member]:
    """``opened``: the bytes were unpacked because their name says archive, so they must be one."""
    kind = _kind(data, name)
    if kind is None:
        if opened:
            raise Refused(UNREADABLE_INNER, path)
        return
    if kind == "sealed":
        raise Refused(UNREADABLE_INNER if depth else SEALED, path)
    if kind in _DECOMPRESS:
        yield from _walk_compressed(kind, data, name, path=path, depth=depth, budget=budget)
        return
    try:
        entries = (_tar_entries if kind == "tar" else _zip_entries)(data, budget.members_left)
    except _ZipRefused as disagreement:
        raise Refused(disagreement.what, disagreement.where(path)) from None
    except _UNREADABLE:
        # A ZIP directory found at the end of other bytes that does not read: no ZIP after all.
        if kind == "zip" and not opened and not data.startswith(b"PK\x03\x04"):
            return
        raise Refused(UNREADABLE_INNER if depth else DAMAGED, path) from None
    budget.take(path, members=len(entries))
    for entry in entries:
        yield Member((*path, entry.name), entry.kind)
    for entry in entries:
        inner = extension(saved_as(entry.name))
        if entry.kind != "file" or inner not in READABLE_EXTENSIONS | SEALED_EXTENSIONS:
            continue
        where = (*path, entry.name)
        if inner in SEALED_EXTENSIONS:
            raise Refused(UNREADABLE_INNER, where)
        if depth + 1 >= ARCHIVE_DEPTH:
            raise Refused(TOO_DEEP, where)
        budget.take(where, archives=1, size=entry.size)
        try:
            unpacked = entry.read(entry.size + 1)
        except _UNREADABLE:
            raise Refused(UNREADABLE_INNER, where) from None
        yield from _walk(
            unpacked, entry.name, path=where, depth=depth + 1, budget=budget, opened=True
        )


@dataclass(frozen=True)
class _Entry:
    name: str
    kind: str
    size: int
    read: Callable[[int], bytes]


def _zip_entries(data: bytes, most: int) -> list[_Entry]:
    """The ZIP's files; past ``most`` of them, unchecked (the budget refuses them)."""
    archive = zipfile.ZipFile(io.BytesIO(data))
    if len(archive.infolist()) <= most:
        infos = sorted(archive.infolist(), key=lambda info: info.header_offset)
        # Where the first file starts: what lies before it is no part of this ZIP.
        first = infos[0].header_offset if infos else archive.start_dir
        _check_ends(data, archive, first)
        _check_local_headers(data, archive, infos, first)
        _check_unicode_paths(archive)

    def reader(info: zipfile.ZipInfo) -> Callable[[int], bytes]:
        def read(most: int) -> bytes:
            with archive.open(info) as member:
                return member.read(most)

        return read

    return [
        _Entry(info.filename, _zip_kind(info), info.file_size, reader(info))
        for info in archive.infolist()
    ]


class _ZipRefused(zipfile.BadZipFile):
    """A ZIP zipfile reads that is refused for how it is built (its ends, headers or names).
    ``what``: the refusal; ``member``: the file at fault, when the refusal names one."""

    def __init__(self, what: str, member: str = ""):
        super().__init__(what)
        self.what = what
        self.member = member

    def where(self, path: tuple[str, ...]) -> tuple[str, ...]:
        return (*path, self.member) if self.member else path


_LOCAL_HEADER = struct.Struct("<4s5H3L2H")
_LOCAL_MAGIC = b"PK\x03\x04"
# After a file's data, flag bit 3: CRC and both sizes (4 or 8 bytes each), perhaps signed.
_DESCRIPTOR_SIZES = (12, 16, 20, 24)


_END_MAGIC = b"PK\x05\x06"
# Local header, central directory entry, end of directory, ZIP64 end record and its locator.
_RECORD_MAGIC = (_LOCAL_MAGIC, b"PK\x01\x02", _END_MAGIC, b"PK\x06\x06", b"PK\x06\x07")


def _check_ends(data: bytes, archive: zipfile.ZipFile, first: int) -> None:
    """The ZIP ends where its end record says (after the comment it declares) and holds no
    other: zipfile tolerates bytes after the end and reads the last end record it finds (a ZIP
    appended to another, or put in its comment, is the one it lists), while 7-Zip and WinRAR
    look for an archive at the end of a file, so what the check listed and what a tool opens
    could differ. Refused: bytes after the end, ZIP records in the comment, and an end record
    before the first file (a whole ZIP in front of the one read)."""
    end_at = data.rfind(_END_MAGIC)
    declared = int.from_bytes(data[end_at + 20 : end_at + 22], "little")
    if (
        end_at + 22 + declared != len(data)
        or any(magic in archive.comment for magic in _RECORD_MAGIC)
        or _END_MAGIC in data[:first]
    ):
        raise _ZipRefused(ZIP_TAIL)


def _check_local_headers(
    data: bytes, archive: zipfile.ZipFile, infos: list[zipfile.ZipInfo], first: int
) -> None:
    """The central directory (what zipfile, 7-Zip and Explorer list) and the local file headers
    (what a streaming extractor walks from the start: bsdtar reading a pipe, Java's
    ZipInputStream) must tell of the same files: each local header names its file as the
    directory does, and the local entries follow one another up to the directory with nothing
    between them or before the first a streaming reader would take for a file. Else the
    program a streaming tool extracts is not the file the check listed. ``infos``: the
    directory's files in the order of their offsets, the first at ``first``."""
    start_dir = archive.start_dir
    if _LOCAL_MAGIC in data[:first]:
        raise _ZipRefused(HEADERS_DISAGREE)
    next_at: tuple[int, ...] = (first,)
    for info in infos:
        at = info.header_offset
        header = data[at : at + _LOCAL_HEADER.size]
        if at not in next_at or len(header) < _LOCAL_HEADER.size:
            raise _ZipRefused(HEADERS_DISAGREE)
        magic, _, flags, _, _, _, _, _, _, name_size, extra_size = _LOCAL_HEADER.unpack(header)
        name_at = at + _LOCAL_HEADER.size
        raw = data[name_at : name_at + name_size]
        if magic != _LOCAL_MAGIC or _zip_name(raw, flags, archive) != info.orig_filename:
            raise _ZipRefused(HEADERS_DISAGREE)
        end = name_at + name_size + extra_size + info.compress_size
        next_at = tuple(end + size for size in _DESCRIPTOR_SIZES) if flags & 0x08 else (end,)
    if start_dir not in next_at:
        raise _ZipRefused(HEADERS_DISAGREE)


def _check_unicode_paths(archive: zipfile.ZipFile) -> None:
    """zipfile, 7-Zip and unzip name a file by its Info-ZIP Unicode Path field (0x7075) when it
    has one; Explorer's built-in ZIP folder and Java's ZipInputStream by its header's name. Both
    are checked by their type: a file saved as setup.exe by one and notes.txt by the other is
    refused, one whose Unicode path only spells its name in UTF-8 passes."""
    for info in archive.infolist():
        own = info.orig_filename.split("\x00", 1)[0]
        if extension(saved_as(own)) != extension(saved_as(info.filename)):
            raise _ZipRefused(TWO_NAMES, info.filename)


def _zip_name(raw: bytes, flags: int, archive: zipfile.ZipFile) -> str:
    """A name as zipfile decodes the directory's: UTF-8 under flag bit 11, else code page 437."""
    if flags & 0x800:
        return raw.decode("utf-8")
    return raw.decode(archive.metadata_encoding or "cp437")  # type: ignore[attr-defined]


def _zip_kind(info: zipfile.ZipInfo) -> str:
    mode = info.external_attr >> 16
    if info.is_dir():
        return "directory"
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return "device"
    return "file"


def _tar_entries(data: bytes, most: int) -> list[_Entry]:
    """The tar's members; never more than one past ``most`` are read (the budget refuses them)."""
    archive = tarfile.TarFile(fileobj=io.BytesIO(data), mode="r")
    entries = []
    while (info := archive.next()) is not None:
        if info.isreg() and info.offset_data + info.size > len(data):
            raise tarfile.ReadError("a member is cut short")
        entries.append(_Entry(info.name, _tar_kind(info), info.size, _slice(data, info)))
        if len(entries) > most:
            break  # the budget refuses it
    else:
        # Python's tarfile stops at the first header it cannot read; GNU tar skips it and reads
        # on. Only the end-of-archive blocks (zeros) may follow the last member.
        if data[archive.offset :].strip(b"\x00"):
            raise tarfile.ReadError("bytes after the last member")
    return entries


def _slice(data: bytes, info: tarfile.TarInfo) -> Callable[[int], bytes]:
    return lambda most: data[info.offset_data : info.offset_data + min(info.size, most)]


def _tar_kind(info: tarfile.TarInfo) -> str:
    if info.isdir():
        return "directory"
    if info.issym() or info.islnk():
        return "link"
    if info.ischr() or info.isblk() or info.isfifo():
        return "device"
    # GNU tar extracts a member of a type it does not know as a regular file.
    return "file"


def _walk_compressed(
    kind: str, data: bytes, name: str, *, path: tuple[str, ...], depth: int, budget: Budget
) -> Iterator[Member]:
    stem = _unpacked_name(name)
    header_name = _gzip_header_name(data) if kind == "gz" else ""
    shown = stem or header_name or f"{name} unpacked"
    budget.take(path, archives=1)
    try:
        unpacked = _DECOMPRESS[kind](data, budget.bytes_left + 1)
    except _UNREADABLE:
        raise Refused(UNREADABLE_INNER if depth else DAMAGED, path) from None
    budget.take(path, size=len(unpacked))
    if header_name and header_name != stem:
        yield Member((*path, header_name), compressed=True)
    where = (*path, shown)
    yield Member(where, data=unpacked, compressed=True)
    yield from _walk(unpacked, shown, path=where, depth=depth, budget=budget, opened=False)


def _unpacked_name(name: str) -> str:
    suffix = extension(name)
    if suffix not in COMPRESSED_SUFFIXES:
        return ""
    return name[: -len(suffix) - 1] + COMPRESSED_SUFFIXES[suffix]


def _gzip_header_name(data: bytes) -> str:
    """The original name a gzip header carries (RFC 1952 FNAME), or ""."""
    flags = data[3] if len(data) > 3 else 0
    if not flags & 0x08:
        return ""
    start = 10
    if flags & 0x04:  # FEXTRA: two bytes of length, then the field
        start = 12 + int.from_bytes(data[10:12], "little")
    end = data.find(b"\x00", start)
    return data[start:end].decode("latin-1") if end > start else ""


def _gunzip(data: bytes, most: int) -> bytes:
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as unpacking:
        return unpacking.read(most)


def _bunzip2(data: bytes, most: int) -> bytes:
    """Stream after stream, as ``bzip2 -d`` unpacks them. Not BZ2File: it drops bytes after a
    stream that do not decode, without a word, and a ZIP there is one 7-Zip and WinRAR open."""
    return _unpack_streams(data, most, bz2.BZ2Decompressor, padding=b"")


def _unxz(data: bytes, most: int) -> bytes:
    """Stream after stream (xz allows several, and zero padding between them), each decoder
    bounded in memory. LZMAFile takes no memory limit."""
    return _unpack_streams(
        data, most, lambda: lzma.LZMADecompressor(memlimit=LZMA_MEMORY_MAX), padding=b"\x00"
    )


class _Decoder(Protocol):
    @property
    def eof(self) -> bool: ...

    @property
    def needs_input(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes, max_length: int = ...) -> bytes: ...


def _unpack_streams(
    data: bytes, most: int, decoder_for: Callable[[], _Decoder], *, padding: bytes
) -> bytes:
    """What ``data`` unpacks to, never more than ``most`` bytes; bytes after a stream must be
    another stream (or ``padding``), else the decoder raises: they are damage, not a tail."""
    unpacked = bytearray()
    rest = data
    while rest.strip(padding) and len(unpacked) < most:
        decoder = decoder_for()
        unpacked += decoder.decompress(rest, max_length=most - len(unpacked))
        while not decoder.eof and len(unpacked) < most:
            if decoder.needs_input:
                raise EOFError("the stream is cut short")
            chunk = decoder.decompress(b"", max_length=most - len(unpacked))
            if not chunk:
                raise EOFError("the stream does not progress")
            unpacked += chunk
        rest = decoder.unused_data
    return bytes(unpacked)


_DECOMPRESS: dict[str, Callable[[bytes, int], bytes]] = {
    "gz": _gunzip,
    "bz2": _bunzip2,
    "xz": _unxz,
}
