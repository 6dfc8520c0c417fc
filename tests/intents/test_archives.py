"""Archives other than ZIP (outside probe): the checks looked inside ZIPs only, so an agent could
attach invoice.tgz holding invoice.exe, or setup.exe.gz, and a reviewer approved what the
recipient's provider then bounced (Gmail refuses a blocked type "also when it is in a compressed
format like .gz or .bz2, or inside an archive like .zip or .tgz") or, worse, delivered. Tar and
the standard library's compressors are now read by the walker the ZIP check uses, within the
same budget. No database: these are the pure checks of intents.attachments."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
import tracemalloc
import zipfile
import zlib

import pytest

from intents import errors
from intents.archives import MEMBERS_MAX
from intents.attachments import Upload, clean_upload

PROGRAM = b"MZ\x90\x00" + bytes(60)
TEXT = b"Order 1042: two chairs, one table.\n"
TOO_DEEP = "an archive nested too deep or too large to look inside"
DAMAGED = "a damaged or truncated archive or compressed file"

COMPRESS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}


def _tarred(members: dict[str, bytes], compression: str = "") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=f"w:{compression}") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _zipped(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _gzip_named(inner_name: str, data: bytes) -> bytes:
    """A gzip file whose header carries ``inner_name`` (FNAME), as `gzip` writes it."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename=inner_name, mode="wb", fileobj=buffer, mtime=0) as packing:
        packing.write(data)
    return buffer.getvalue()


def _refusal(filename: str, data: bytes, content_type: str = "application/octet-stream") -> str:
    with pytest.raises(errors.InvalidInput) as refused:
        clean_upload(0, Upload(filename, content_type, data))
    assert refused.value.code == "attachment_type_refused"
    assert refused.value.field == "attachments[0]"
    return refused.value.message


def _passes(filename: str, data: bytes) -> bool:
    return clean_upload(0, Upload(filename, "application/octet-stream", data)).sha256 != ""


# --- single-file compression --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filename", "shown"),
    [
        (
            "setup.exe.gz",
            ".exe are refused (programs, scripts and macro documents), also compressed (.gz)",
        ),
        (
            "setup.EXE.bz2",
            ".exe are refused (programs, scripts and macro documents), also compressed (.bz2)",
        ),
        (
            "run.sh.xz",
            ".sh are refused (programs, scripts and macro documents), also compressed (.xz)",
        ),
        (
            "macro.xlsm.gz.gz",
            ".xlsm are refused (programs, scripts and macro documents), also compressed (.gz)",
        ),
    ],
)
def test_a_refused_type_is_refused_compressed_by_its_name(filename, shown):
    message = _refusal(filename, gzip.compress(TEXT))

    assert message == f'attachments[0] "{filename}": files of type {shown}.'


@pytest.mark.parametrize("compression", ["gz", "bz2", "xz"])
def test_a_compressed_program_is_refused_by_its_first_bytes_naming_what_it_unpacks_to(compression):
    message = _refusal(f"invoice.pdf.{compression}", COMPRESS[compression](PROGRAM))

    assert message == (
        f'attachments[0] "invoice.pdf.{compression}": the content is a Windows program (MZ header), '
        'compressed ("invoice.pdf"), which is refused.'
    )


def test_the_name_in_a_gzip_header_is_checked_like_the_file_name():
    """gunzip -N and 7-Zip extract a .gz under the name its header carries."""
    message = _refusal("invoice.pdf.gz", _gzip_named("setup.exe", TEXT))

    assert message == (
        'attachments[0] "invoice.pdf.gz": the content is a compressed program or script '
        '("setup.exe"), which is refused.'
    )


def test_a_compressed_disk_image_and_a_compressed_file_under_any_name_are_looked_into():
    iso = bytes(16 * 2048) + b"\x01CD001\x01" + bytes(2041)

    assert "disk image" in _refusal("backup.gz", gzip.compress(iso))
    assert "Windows program" in _refusal("data.bin", bz2.compress(PROGRAM))


@pytest.mark.parametrize("compression", ["gz", "bz2", "xz"])
def test_harmless_compressed_files_pass(compression):
    assert _passes(f"orders.csv.{compression}", COMPRESS[compression](TEXT * 100))
    assert _passes(f"logs.tar.{compression}", _tarred({"a.log": TEXT}, compression))


# --- tar and compressed tars --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filename", "compression", "where"),
    [
        ("invoice.tar", "", '"docs/invoice.exe"'),
        ("invoice.tgz", "gz", '"docs/invoice.exe" in "invoice.tar"'),
        ("invoice.tar.gz", "gz", '"docs/invoice.exe" in "invoice.tar"'),
        ("invoice.tbz2", "bz2", '"docs/invoice.exe" in "invoice.tar"'),
        ("invoice.tar.bz2", "bz2", '"docs/invoice.exe" in "invoice.tar"'),
        ("invoice.txz", "xz", '"docs/invoice.exe" in "invoice.tar"'),
        ("invoice.tar.xz", "xz", '"docs/invoice.exe" in "invoice.tar"'),
    ],
)
def test_a_tar_holding_a_program_is_refused_naming_the_member(filename, compression, where):
    data = _tarred({"docs/readme.txt": TEXT, "docs/invoice.exe": PROGRAM}, compression)

    message = _refusal(filename, data, "application/gzip")

    assert message == (
        f'attachments[0] "{filename}": the content is an archive holding a program or script '
        f"({where}), which is refused."
    )


@pytest.mark.parametrize(
    "member",
    ["invoice.exe.", "docs\\invoice.exe", "/tmp/invoice.exe", "../../invoice.exe", "x.js.gz"],
)
def test_a_tar_member_is_checked_by_the_name_it_is_saved_as(member):
    assert "program or script" in _refusal("docs.tar", _tarred({member: TEXT}))


def test_archives_of_every_kind_nest_and_share_the_depth_limit():
    """The ZIP check's three levels, whatever the kinds; the .gz of a .tgz is no level of its own."""
    program = _zipped({"setup.exe": PROGRAM})
    zip_tgz_zip = _zipped({"docs.tgz": _tarred({"more.zip": program}, "gz")})
    tar_zip = _tarred({"docs.zip": program})
    gz_of_zip = gzip.compress(program)
    too_deep = _tarred(
        {"1.tar": _tarred({"2.tgz": _tarred({"3.zip": _zipped({"a": TEXT})}, "gz")})}
    )

    assert '"setup.exe" in "more.zip" in "docs.tar" in "docs.tgz"' in _refusal("a.zip", zip_tgz_zip)
    assert '"setup.exe" in "docs.zip"' in _refusal("a.tar", tar_zip)
    assert '"setup.exe" in "docs.zip"' in _refusal("docs.zip.gz", gz_of_zip)
    assert f'{TOO_DEEP} ("3.zip" in "2.tar" in "2.tgz" in "1.tar")' in _refusal("a.tar", too_deep)
    assert _passes("a.zip", _zipped({"docs.tgz": _tarred({"b.zip": _zipped({"c": TEXT})}, "gz")}))


# --- bombs and hostile archives -----------------------------------------------------------------


def _gzip_of_zeros(megabytes: int) -> bytes:
    packing = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1024 * 1024)
    return b"".join(packing.compress(chunk) for _ in range(megabytes)) + packing.flush()


def test_a_compression_bomb_is_refused_without_unpacking_it():
    """200 MB of zeros in 200 kB: the walk stops one byte past its 16 MB budget."""
    bomb = _gzip_of_zeros(200)
    tracemalloc.start()
    message = _refusal("zeros.txt.gz", bomb)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    assert message == f'attachments[0] "zeros.txt.gz": the content is {TOO_DEEP}, which is refused.'
    assert peak < 48 * 1024 * 1024
    assert TOO_DEEP in _refusal("zeros.tar.bz2", bz2.compress(bytes(17 * 1024 * 1024)))


def test_an_archive_of_too_many_members_is_refused():
    many = _tarred({f"{n}.txt": b"" for n in range(MEMBERS_MAX + 1)}, "gz")

    assert TOO_DEEP in _refusal("many.tgz", many)
    assert _passes("enough.tgz", _tarred({f"{n}.txt": b"" for n in range(100)}, "gz"))


def _tar_with_garbage_before(member: str) -> bytes:
    """A tar of readme.txt, a block no header explains, then ``member``: Python's tarfile stops
    at the bad block, GNU tar skips it and extracts ``member``."""
    first = _tarred({"readme.txt": TEXT})[:1024]  # header and data block, no end blocks
    return first + b"\xff" * 512 + _tarred({member: PROGRAM})


@pytest.mark.parametrize(
    ("filename", "data"),
    [
        ("invoice.tgz", _tarred({"a.txt": TEXT * 2000}, "gz")[:-200]),
        ("invoice.tar", _tarred({"a.txt": TEXT * 100})[:1500]),
        ("invoice.tar", _tar_with_garbage_before("setup.exe")),
        ("invoice.pdf.gz", gzip.compress(TEXT)[:12] + b"\x00" * 20),
        ("invoice.pdf.bz2", bz2.compress(TEXT * 100)[:-10]),
        ("invoice.pdf.xz", lzma.compress(TEXT * 100)[:-30]),
        ("notes.tar", TEXT * 20),
        ("docs.zip", _zipped({"a.txt": TEXT * 100})[:-30]),
        ("notes.txt.bz2", bz2.compress(TEXT) + b"not a stream"),
        ("notes.txt.bz2", bz2.compress(TEXT) + _zipped({"setup.exe": PROGRAM})),
        ("notes.txt.gz", gzip.compress(TEXT) + _zipped({"setup.exe": PROGRAM})),
        ("notes.txt.xz", lzma.compress(TEXT) + _zipped({"setup.exe": PROGRAM})),
    ],
    ids=[
        "tgz-cut",
        "tar-cut",
        "tar-hidden",
        "gz-broken",
        "bz2-cut",
        "xz-cut",
        "tar-not",
        "zip-cut",
        "bz2-trailing-bytes",
        "bz2-zip-behind",
        "gz-zip-behind",
        "xz-zip-behind",
    ],
)
def test_a_damaged_or_truncated_archive_is_refused(filename, data):
    """Bytes after a compressed stream that are no stream are damage, whatever the compressor:
    bzip2 ignored them (BZ2File drops what does not decode), gzip and xz refused them, and a ZIP
    there is what 7-Zip and WinRAR find at the end of any bytes."""
    message = _refusal(filename, data)

    assert message.startswith(f'attachments[0] "{filename}": the content is {DAMAGED}')


def test_a_damaged_archive_inside_another_is_refused_naming_it():
    data = _tarred({"readme.txt": TEXT, "inner.tgz": b"\x1f\x8b\x08 not gzip"})

    assert _refusal("a.tar", data) == (
        'attachments[0] "a.tar": the content is an archive holding an archive that cannot be '
        'looked inside (encrypted, damaged, or 7z, RAR and the like) ("inner.tgz"), which is '
        "refused."
    )


def _tar_with(kind: bytes, name: str, target: str = "") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = target
        archive.addfile(info)
    return buffer.getvalue()


def _zip_symlink() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("invoice.pdf")
        info.create_system = 3
        info.external_attr = 0o120777 << 16
        archive.writestr(info, "../../.bashrc")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("filename", "data"),
    [
        ("a.tar", _tar_with(tarfile.SYMTYPE, "invoice.pdf", "../../.bashrc")),
        ("a.tar", _tar_with(tarfile.LNKTYPE, "invoice.pdf", "setup.exe")),
        ("a.tar", _tar_with(tarfile.CHRTYPE, "invoice.pdf")),
        ("a.tar", _tar_with(tarfile.FIFOTYPE, "invoice.pdf")),
        ("a.zip", _zip_symlink()),
    ],
    ids=["symlink", "hardlink", "device", "fifo", "zip-symlink"],
)
def test_links_and_devices_in_an_archive_are_refused(filename, data):
    assert _refusal(filename, data) == (
        f'attachments[0] "{filename}": the content is an archive holding a link or a device '
        '("invoice.pdf"), which is refused.'
    )


def test_a_member_name_is_shown_escaped_when_it_holds_control_or_format_characters():
    data = _tarred({"invoice\u202efdp.exe": PROGRAM})

    assert '("invoice\\u202efdp.exe")' in _refusal("a.tar", data)


# --- archives the standard library cannot read ---------------------------------------------------

SEVEN_ZIP = b"7z\xbc\xaf\x27\x1c\x00\x04" + bytes(56)
RAR = b"Rar!\x1a\x07\x01\x00" + bytes(56)
SEALED = "an archive of a kind whose files cannot be checked (7z, RAR and the like)"


@pytest.mark.parametrize(
    ("filename", "said"),
    [
        ("docs.7z", "files of type .7z are refused: what they hold cannot be checked"),
        ("docs.RAR", "files of type .rar are refused: what they hold cannot be checked"),
        ("backup.tar.zst", "files of type .zst are refused: what they hold cannot be checked"),
        (
            "docs.7z.gz",
            "files of type .7z are refused: what they hold cannot be checked, also compressed (.gz)",
        ),
    ],
)
def test_an_archive_that_cannot_be_looked_inside_is_refused_by_its_name(filename, said):
    """7z and RAR need libraries outside the standard library; what they hold cannot be checked,
    so they are refused, as an encrypted ZIP inside a ZIP is."""
    message = _refusal(filename, TEXT)

    assert message == f'attachments[0] "{filename}": {said} (send a .zip instead).'


@pytest.mark.parametrize(
    "content_type", ["application/x-7z-compressed", "application/vnd.rar", "application/x-rar"]
)
def test_an_archive_that_cannot_be_looked_inside_is_refused_by_its_declared_type(content_type):
    message = _refusal("docs.bin", TEXT, content_type)

    assert message == (
        f'attachments[0] "docs.bin": content type {content_type} is refused: what such an '
        "archive holds cannot be checked (send a .zip instead)."
    )


@pytest.mark.parametrize(
    ("filename", "data", "what"),
    [
        ("invoice.pdf", SEVEN_ZIP, SEALED),
        ("invoice.pdf", RAR, SEALED),
        ("backup.gz", gzip.compress(RAR), f'{SEALED} ("backup")'),
        ("docs.zip", _zipped({"a.txt": TEXT, "more.7z": SEVEN_ZIP}), None),
        ("docs.tgz", _tarred({"more.rar": RAR}, "gz"), None),
        ("docs.zip", _zipped({"more.zip": SEVEN_ZIP}), None),
    ],
    ids=["7z-as-pdf", "rar-as-pdf", "rar-gzipped", "7z-in-zip", "rar-in-tgz", "7z-as-zip-in-zip"],
)
def test_an_archive_that_cannot_be_looked_inside_is_refused_by_its_bytes_or_inside_another(
    filename, data, what
):
    message = _refusal(filename, data)

    expected = what or "an archive holding an archive that cannot be looked inside"
    assert message.startswith(f'attachments[0] "{filename}": the content is {expected}')
