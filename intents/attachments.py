"""Which files a draft may carry: names, types, sizes and contents, checked before anything is
stored. Pure (no database): the draft services call ``clean_uploads`` for every entry point.

Every refusal is an ``InvalidInput`` whose field is ``attachments[i]`` (``forward_attachments[i]``
for a file forwarded from the customer's message) and whose message names the file, so an agent
knows which of its files to fix.

Dangerous files are refused by their extension, by the declared content type AND by their first
bytes, since each of the three can lie: an ``invoice.pdf`` that starts with ``MZ`` is a Windows
program, a ``report.docx`` that holds ``vbaProject.bin`` is a macro document. Archives and
compressed files are looked inside (``intents.archives`` walks them: ZIP, tar, gzip, bzip2, xz,
nested), and what they hold is checked as Gmail does: a refused type is refused in an archive and
compressed too (``setup.exe.gz``, ``invoice.tgz`` holding ``invoice.exe``), each refusal naming
the member. Archives it cannot read (7z, RAR and the like: ``archives.SEALED_EXTENSIONS``) are
refused by name, declared type and content, not let through unread (see ``intents.archives``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings

from intents import archives, errors
from intents.archives import extension, saved_as

MAX_FILENAME = 255

# Programs, scripts, installers, shortcuts, disk images and macro-enabled Office documents: what
# mail filters (Gmail's and Outlook's blocked-attachment lists) refuse, because opening one runs
# code.
REFUSED_EXTENSIONS = frozenset(
    [
        "ade",
        "adp",
        "apk",
        "app",
        "appref-ms",
        "application",
        "appx",
        "appxbundle",
        "bas",
        "bat",
        "bash",
        "cab",
        "chm",
        "class",
        "cmd",
        "com",
        "cpl",
        "csh",
        "diagcab",
        "diagcfg",
        "diagpack",
        "diagpkg",
        "dll",
        "dmg",
        "docm",
        "dotm",
        "drv",
        "elf",
        "ex",
        "ex_",
        "exe",
        "gadget",
        "grp",
        "hlp",
        "hta",
        "img",
        "inf",
        "ins",
        "iso",
        "isp",
        "jar",
        "jnlp",
        "js",
        "jse",
        "ksh",
        "lib",
        "lnk",
        "mad",
        "maf",
        "mag",
        "mam",
        "maq",
        "mar",
        "mas",
        "mat",
        "mau",
        "mav",
        "maw",
        "mcf",
        "mda",
        "mde",
        "mdt",
        "mdw",
        "mdz",
        "mjs",
        "msc",
        "msh",
        "msh1",
        "msh2",
        "mshxml",
        "msh1xml",
        "msh2xml",
        "msi",
        "msix",
        "msixbundle",
        "msp",
        "mst",
        "msu",
        "nsh",
        "ocx",
        "ops",
        "osd",
        "pcd",
        "php",
        "php3",
        "php4",
        "php5",
        "phtml",
        "pif",
        "pkg",
        "pl",
        "plg",
        "potm",
        "ppam",
        "ppsm",
        "pptm",
        "prf",
        "prg",
        "ps1",
        "ps1xml",
        "ps2",
        "ps2xml",
        "psc1",
        "psc2",
        "psd1",
        "psm1",
        "py",
        "pyc",
        "pyo",
        "pyw",
        "pyz",
        "rb",
        "reg",
        "rpm",
        "run",
        "scf",
        "scr",
        "sct",
        "sh",
        "shb",
        "shs",
        "sldm",
        "so",
        "sys",
        "url",
        "vb",
        "vbe",
        "vbp",
        "vbs",
        "vhd",
        "vhdx",
        "vsmacros",
        "vsw",
        "vxd",
        "webpkg",
        "ws",
        "wsc",
        "wsf",
        "wsh",
        "xbap",
        "xlam",
        "xll",
        "xlsb",
        "xlsm",
        "xltm",
        "xnk",
        "zsh",
        "deb",
    ]
)
REFUSED_TYPES = frozenset(
    {
        "application/x-msdownload",
        "application/x-msdos-program",
        "application/x-dosexec",
        "application/x-executable",
        "application/x-elf",
        "application/x-mach-binary",
        "application/x-sharedlib",
        "application/x-msi",
        "application/x-ms-installer",
        "application/vnd.microsoft.portable-executable",
        "application/x-sh",
        "application/x-shellscript",
        "application/x-csh",
        "application/x-bat",
        "application/x-python",
        "text/x-python",
        "text/x-shellscript",
        "application/x-perl",
        "application/x-php",
        "application/x-httpd-php",
        "application/javascript",
        "application/x-javascript",
        "text/javascript",
        "application/ecmascript",
        "text/vbscript",
        "application/x-vbscript",
        "application/hta",
        "application/java-archive",
        "application/x-java-archive",
        "application/vnd.android.package-archive",
        "application/x-apple-diskimage",
        "application/x-ms-shortcut",
        "application/x-iso9660-image",
        "application/x-cd-image",
        "application/x-raw-disk-image",
        "application/x-vhd",
    }
)
# Archives intents.archives cannot read (archives.SEALED_EXTENSIONS), as their senders declare them.
SEALED_TYPES = frozenset(
    {
        "application/x-7z-compressed",
        "application/vnd.rar",
        "application/x-rar",
        "application/x-rar-compressed",
        "application/x-ace-compressed",
        "application/x-arj",
        "application/x-lzh-compressed",
        "application/zstd",
        "application/x-lzip",
    }
)
# Names Windows reserves for devices, with any extension: "NUL.txt" cannot be saved as a file.
WINDOWS_DEVICE_NAMES = frozenset(
    ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", "CLOCK$"]
    + [f"{port}{n}" for port in ("COM", "LPT") for n in [*range(10), "¹", "²", "³"]]
)
# What Windows refuses in a file name besides the separators "/", "\\" and ":" (refused for what
# they do to a path): a file named so cannot be saved under its name, and a '"' in it
# ('x.exe"; filename="invoice.pdf') is harmless only while the provider quotes it in the MIME
# header. Their full-width forms (U+FF1F and the like) are other characters, which Windows saves.
WINDOWS_FORBIDDEN = frozenset('"<>|?*')
# Written "_" in the name of a customer's file sent back to them (``saveable_name``).
UNSAVEABLE = str.maketrans(dict.fromkeys('"<>|?*:', "_"))
CONTENT_TYPE_RE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
# First bytes of programs: Windows PE/DOS (MZ), ELF, Mach-O (both byte orders, 32/64 bit, fat),
# Java class files share CAFEBABE with fat Mach-O; "#!" starts any Unix script.
EXECUTABLE_MAGIC = (
    (b"MZ", "a Windows program (MZ header)"),
    (b"\x7fELF", "a Linux program (ELF header)"),
    (b"\xfe\xed\xfa\xce", "a macOS program (Mach-O header)"),
    (b"\xfe\xed\xfa\xcf", "a macOS program (Mach-O header)"),
    (b"\xce\xfa\xed\xfe", "a macOS program (Mach-O header)"),
    (b"\xcf\xfa\xed\xfe", "a macOS program (Mach-O header)"),
    (b"\xca\xfe\xba\xbe", "a macOS or Java program (CAFEBABE header)"),
    (b"#!", "a script (#! line)"),
)
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# The stream names of VBA macros in an OLE2 document (.doc, .xls, .ppt), as UTF-16LE directory
# entries: "_VBA_PROJECT" and "Macros".
OLE_MACRO_MARKERS = ("_VBA_PROJECT".encode("utf-16-le"), "Macros".encode("utf-16-le"))


@dataclass(frozen=True)
class Upload:
    """One file as a draft service takes it: already decoded, not yet checked. A file forwarded
    from a customer's message names that message (its provider id) and its sender, as recorded;
    an uploaded one names none. ``field``: the request's field a refusal names, when it is not
    the file's place among the version's files (``attachments[i]``): a forwarded file is the
    agent's ``forward_attachments[i]``."""

    filename: str
    content_type: str
    data: bytes
    source_message_id: str = ""
    source_sender: str = ""
    field: str = ""


@dataclass(frozen=True)
class CleanUpload:
    filename: str
    content_type: str
    data: bytes
    sha256: str
    source_message_id: str = ""
    source_sender: str = ""

    @property
    def size(self) -> int:
        return len(self.data)


def _refuse(where: int | str, name: str, code: str, why: str) -> errors.InvalidInput:
    """A 422 naming the file: ``where``, its place in ``attachments``, or the field itself."""
    field = where if isinstance(where, str) else f"attachments[{where}]"
    shown = name if name and _name_problem(name) is None else ascii(name)
    return errors.InvalidInput(code, f'{field} "{shown}": {why}', field=field)


def saveable_name(name: str) -> str:
    """The name a customer's file is forwarded under: each character Windows refuses in a file
    name (``WINDOWS_FORBIDDEN`` and ":") written "_", as browsers save a download so. Renamed,
    not refused: the customer named it, the agent cannot rename it, and a reply that cannot
    send back "Q3 report: final.pdf" over its colon helps no one; the name the reviewer approves
    (and the content hash covers) is this one, and it is checked like an uploaded file's after
    (a program in it is still refused). Only those characters: "/" and "\\" make a path, and a
    control or look-alike character is a trick, not a customer's habit; they stay refused."""
    return name.translate(UNSAVEABLE)


def decode_base64(index: int, filename: str, content) -> bytes:
    """The bytes of a base64 ``content`` (standard alphabet, padding required; line breaks and
    spaces, as MIME encoders write them, are ignored), or a 422 naming the file."""
    if not isinstance(content, str):
        raise _refuse(index, filename, "attachment_base64_invalid", "content must be base64 text.")
    limit = int(settings.ATTACHMENT_MAX_FILE_BYTES)
    # Refuse a huge upload before decoding it: base64 is 4/3 of the size, plus line breaks.
    if len(content) > (limit * 4 // 3 + 4) * 2:
        raise _too_large(index, filename, limit)
    compact = re.sub(r"[ \t\r\n]", "", content)
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise _refuse(
            index, filename, "attachment_base64_invalid", "content is not valid base64."
        ) from None


def _too_large(where: int | str, filename: str, limit: int) -> errors.InvalidInput:
    return _refuse(
        where,
        filename,
        "attachment_too_large",
        f"the file is larger than {limit} bytes, the limit per file.",
    )


def _name_problem(name: str) -> str | None:
    if not name or not name.strip():
        return "a filename is required."
    if len(name) > MAX_FILENAME:
        return f"the filename is longer than {MAX_FILENAME} characters."
    return _shape_problem(name) or _forbidden_problem(name) or _look_alike_problem(name)


def _forbidden_problem(name: str) -> str | None:
    # Not part of _shape_problem, which also judges the name as it reads (_look_alike_problem):
    # a full-width question mark reads as "?" but is no trick, and Windows saves it.
    if forbidden := next((char for char in name if char in WINDOWS_FORBIDDEN), None):
        return (
            f"the filename contains {forbidden}, which no Windows file name may hold "
            '(" < > | ? * :); rename the file.'
        )
    return None


def _shape_problem(name: str) -> str | None:
    # ":" as well: Windows reads "invoice.exe::$DATA" (or "invoice.exe:x.pdf") as a stream of
    # "invoice.exe", so a file saved under that name is a program the extension check let pass,
    # the same trick as the trailing dot refused below.
    if "/" in name or "\\" in name or ":" in name:
        return "the filename must not contain path separators (/, \\ or :)."
    if name.split(".", 1)[0].strip().upper() in WINDOWS_DEVICE_NAMES:
        return "the filename must not be a Windows device name (CON, NUL, COM1 and the like)."
    for char in name:
        category = unicodedata.category(char)
        # Cc: NUL and every control character; Cf: invisible format characters such as the
        # right-to-left override that shows "invoice\u202efdp.exe" as "invoiceexe.pdf"; Cs: a
        # lone surrogate; Zl/Zp: line and paragraph separators (a header injection).
        if category in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            return f"the filename contains a control or format character (U+{ord(char):04X})."
    if name.strip(" .") == "" or name != name.strip() or name.endswith("."):
        return "the filename must not start or end with spaces or end with a dot."
    return None


# Slashes that NFKC leaves alone but that are drawn as "/" or "\\" ("a\u2044b" shows as a/b).
SLASH_LOOK_ALIKES = str.maketrans(
    {
        "\u2044": "/",  # FRACTION SLASH
        "\u2215": "/",  # DIVISION SLASH
        "\u2571": "/",  # BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT
        "\u27cb": "/",  # MATHEMATICAL RISING DIAGONAL
        "\u29f8": "/",  # BIG SOLIDUS
        "\u2216": "\\",  # SET MINUS
        "\u2572": "\\",  # BOX DRAWINGS LIGHT DIAGONAL UPPER LEFT TO LOWER RIGHT
        "\u27cd": "\\",  # MATHEMATICAL FALLING DIAGONAL
        "\u29f5": "\\",  # REVERSE SOLIDUS OPERATOR
        "\u29f9": "\\",  # BIG REVERSE SOLIDUS
    }
)


def _read_as(text: str) -> str:
    """``text`` as people read it: compatibility characters folded (NFKC: "\uff0e" is ".",
    "\uff45" is "e"), and the slashes NFKC keeps taken for the ASCII ones they look like. Those
    first: NFKC writes "\u00bd" as 1, U+2044, 2, which shows as one character, not a path."""
    return unicodedata.normalize("NFKC", text.translate(SLASH_LOOK_ALIKES))


def _look_alike_problem(name: str) -> str | None:
    """What is wrong with ``name`` read as it shows (``_read_as``), naming the character that
    makes it so: a look-alike slash or colon is a path separator, a look-alike dot can end the
    name or make it dots only, and one that changes the extension is the spoof of a type
    ("invoice\uff0eexe" shows as invoice.exe and has no extension to refuse). Names whose
    compatibility characters change none of this (half-width katakana, a ligature, fullwidth
    letters before a real extension, an ellipsis inside) pass."""
    read = _read_as(name)
    if read == name:
        return None
    if problem := _shape_problem(read):
        culprit = _culprit(name, lambda candidate: _shape_problem(candidate) is not None)
        return f"{culprit}: read so, {problem}"
    # Canonical equivalents are the same text: a name in NFD (as macOS writes them) is composed
    # by NFKC too, which changes no extension a person sees.
    shown, actual = extension(read), extension(unicodedata.normalize("NFC", name))
    if shown == actual:
        return None
    culprit = _culprit(name, lambda candidate: extension(candidate) != actual)
    has = f"its extension is .{actual}" if actual else "it has no extension"
    what = f"a .{shown} file" if shown else "a file with no extension"
    return f'{culprit}: it shows as "{read}", {what}, but {has}.'


def _culprit(name: str, fails) -> str:
    """The character to name: the first whose reading alone makes the name ``fail``; else the
    first whose reading, with all before it read too, does ("invoice.\uff45\uff58\uff45" needs
    every letter read); else the first that reads as something else."""
    changed = [(index, char) for index, char in enumerate(name) if _read_as(char) != char]
    alone = (i for i, c in changed if fails(name[:i] + _read_as(c) + name[i + 1 :]))
    along = (i for i, _ in changed if fails(_read_as(name[: i + 1]) + name[i + 1 :]))
    index = next(alone, None)
    if index is None:
        index = next(along, changed[0][0])
    char = name[index]
    return (
        f"the filename contains U+{ord(char):04X} ({unicodedata.name(char, 'unnamed')}), "
        f'which reads as "{_read_as(char)}"'
    )


# Disk images: Windows mounts one on a double-click and shows the programs inside without the
# mark of the web (the classic way past the checks on the programs themselves), so Gmail refuses
# .iso, .img and .vhd. By content too, whatever the name: ISO 9660 and UDF volumes name their
# first volume descriptor at byte 32769, after 16 sectors of system area; VHDX begins with its
# signature and a VHD ends with its footer's cookie (a dynamic one begins with a copy of it).
# A descriptor is its type (0 to 3, or 255 for the last), the identifier and version 1: a text
# that only says "CD001" there is no volume.
DISK_IMAGE_DESCRIPTORS = (b"CD001", b"BEA01", b"NSR02", b"NSR03")
DISK_IMAGE_DESCRIPTOR_AT = 16 * 2048


def _disk_image(data: bytes) -> bool:
    descriptor = data[DISK_IMAGE_DESCRIPTOR_AT : DISK_IMAGE_DESCRIPTOR_AT + 7]
    return (
        (
            len(descriptor) == 7
            and descriptor[0] in (0, 1, 2, 3, 255)
            and descriptor[1:6] in DISK_IMAGE_DESCRIPTORS
            and descriptor[6] == 1
        )
        or data.startswith((b"vhdxfile", b"conectix"))
        or data[-512:].startswith(b"conectix")
    )


def sniffed_danger(
    data: bytes, name: str = "", budget: archives.Budget | None = None
) -> str | None:
    """What the bytes (of a file named ``name``) say a file is, if it is something that runs
    code, or an archive holding one or that cannot be looked inside; None otherwise.
    ``budget``: what the draft's other files left of the archive budget."""
    if what := _bytes_danger(data):
        return what
    try:
        for member in archives.members(data, name, budget):
            if what := _member_danger(member):
                return f"{what} ({_where(member.path)})"
    except archives.Refused as refused:
        return f"{refused.what} ({_where(refused.path)})" if refused.path else refused.what
    return None


def _bytes_danger(data: bytes) -> str | None:
    for magic, what in EXECUTABLE_MAGIC:
        if data.startswith(magic):
            return what
    if _disk_image(data):
        return "a disk image (ISO, UDF or VHD), which opens as a drive of files"
    if data.startswith(OLE_MAGIC) and any(marker in data for marker in OLE_MACRO_MARKERS):
        return "an Office document with macros (VBA project)"
    return None


def _member_danger(member: archives.Member) -> str | None:
    """What is refused in an archive's member, checked by the name it is saved as and, for the
    content of a compressed file, by its first bytes like any file's."""
    name = member.path[-1]
    if member.kind in ("link", "device"):
        # A link extracts as another file (anywhere: "../../.bashrc"), a device as no file.
        return "an archive holding a link or a device"
    if name.lower().endswith("vbaproject.bin"):
        return "an Office document with macros"
    if refused_extension(saved_as(name)):
        if member.compressed:
            return "a compressed program or script"
        return "an archive holding a program or script"
    if member.data is not None and (what := _bytes_danger(member.data)):
        return f"{what}, compressed"
    return None


def _where(path: tuple[str, ...]) -> str:
    """Where a member is: ``"setup.exe" in "docs.zip"``, innermost first."""
    return " in ".join(_quoted(name) for name in reversed(path))


def _quoted(name: str) -> str:
    shown = name if name.isprintable() else ascii(name)[1:-1]
    return f'"{shown[:80]}…"' if len(shown) > 80 else f'"{shown}"'


def refused_extension(name: str) -> str | None:
    """The refused extension of ``name``, also under compressors' suffixes ("setup.exe.gz":
    exe), as Gmail refuses a blocked type compressed."""
    found = _unpacked_extension(name)
    return found if found in REFUSED_EXTENSIONS else None


def _unpacked_extension(name: str) -> str:
    """The extension of what ``name`` unpacks to: "setup.exe.gz.gz" is an .exe."""
    while archives.COMPRESSED_SUFFIXES.get(found := extension(name)) == "":
        name = name[: -len(found) - 1]
    return found


def clean_upload(
    index: int, upload: Upload, *, budget: archives.Budget | None = None
) -> CleanUpload:
    """One file, checked: its name, declared type, size and content, or a 422 naming it (its
    place among the version's files, or the request field it came from). ``budget``: the
    draft's archive budget, shared with its other files (``clean_uploads``)."""
    where: int | str = upload.field or index
    name = upload.filename if isinstance(upload.filename, str) else ""
    if problem := _name_problem(name):
        raise _refuse(where, name, "attachment_filename_invalid", problem)
    content_type = upload.content_type if isinstance(upload.content_type, str) else ""
    content_type = content_type.strip().lower()
    if not CONTENT_TYPE_RE.fullmatch(content_type):
        raise _refuse(
            where,
            name,
            "attachment_content_type_invalid",
            "content_type must be a media type such as application/pdf.",
        )
    data = upload.data
    limit = int(settings.ATTACHMENT_MAX_FILE_BYTES)
    if len(data) > limit:
        raise _too_large(where, name, limit)
    if not data:
        raise _refuse(where, name, "attachment_empty", "the file is empty.")
    if refused := refused_extension(name):
        outer = extension(name)
        compressed = "" if outer == refused else f", also compressed (.{outer})"
        raise _refuse(
            where,
            name,
            "attachment_type_refused",
            f"files of type .{refused} are refused (programs, scripts and macro documents)"
            f"{compressed}.",
        )
    if (sealed := _unpacked_extension(name)) in archives.SEALED_EXTENSIONS:
        outer = extension(name)
        compressed = "" if outer == sealed else f", also compressed (.{outer})"
        raise _refuse(
            where,
            name,
            "attachment_type_refused",
            f"files of type .{sealed} are refused: what they hold cannot be checked{compressed} "
            "(send a .zip instead).",
        )
    if content_type in SEALED_TYPES:
        raise _refuse(
            where,
            name,
            "attachment_type_refused",
            f"content type {content_type} is refused: what such an archive holds cannot be "
            "checked (send a .zip instead).",
        )
    if content_type in REFUSED_TYPES or "macroenabled" in content_type:
        raise _refuse(
            where,
            name,
            "attachment_type_refused",
            f"content type {content_type} is refused (programs, scripts and macro documents).",
        )
    if what := sniffed_danger(data, name, budget):
        raise _refuse(
            where, name, "attachment_type_refused", f"the content is {what}, which is refused."
        )
    return CleanUpload(
        name,
        content_type,
        data,
        hashlib.sha256(data).hexdigest(),
        source_message_id=upload.source_message_id,
        source_sender=upload.source_sender,
    )


def clean_uploads(uploads: Iterable[Upload]) -> list[CleanUpload]:
    """Every file of a version, checked one by one within one archive budget (each file its
    own made ten archives cost a request ten times the CPU), then the count and total size."""
    items = list(uploads)
    most = int(settings.ATTACHMENT_MAX_FILES)
    if len(items) > most:
        raise errors.InvalidInput(
            "too_many_attachments",
            f"A draft may carry at most {most} attachments; this one has {len(items)}.",
            field="attachments",
        )
    budget = archives.Budget()
    cleaned = [clean_upload(index, upload, budget=budget) for index, upload in enumerate(items)]
    total = sum(c.size for c in cleaned)
    limit = int(settings.ATTACHMENT_MAX_DRAFT_BYTES)
    if total > limit:
        # Name the file that crosses the limit.
        running = 0
        for index, item in enumerate(cleaned):
            running += item.size
            if running > limit:
                raise _refuse(
                    items[index].field or index,
                    item.filename,
                    "attachments_too_large",
                    f"with this file the attachments total {total} bytes, over the limit of "
                    f"{limit} bytes per draft.",
                )
    return cleaned
