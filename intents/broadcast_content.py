"""A broadcast's template, its recipients as uploaded, and the hashes a person approves.

The template syntax is deliberately tiny: ``{{ name }}`` is replaced by the recipient's variable
``name``; nothing else (no filters, tags, attribute access or logic). In the HTML body every value
is HTML-escaped, and a placeholder may sit only in text or a quoted attribute value; one that
begins a link or image address takes http(s) or mailto URLs only (``broadcast_html``). A variable
used in the subject may hold no line break (it would become a header).

The approval hash covers the template, every recipient's address and variables, in canonical
order (sorted by address), through per-recipient *leaf* hashes, so the worker can check one
recipient's row against what was approved without reading all 10,000 (``leaf_hash``); the
approved broadcast hash binds the digest of all leaves (``broadcast_hash``).
"""

from __future__ import annotations

import csv
import hashlib
import html as html_lib
import io
import itertools
import json
import re
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass

from django.utils.translation import gettext as _

from common.addresses import same_recipient_key, stray_character_refusal
from intents.hashing import content_hash as message_content_hash
from intents.policy import is_own_address, normalize_address, own_mailbox_refusal
from mailboxes.headers import encoded_word_in, line_break_in

MAX_VARIABLES = 50
MAX_VARIABLE_NAME = 64
MAX_VARIABLE_VALUE = 2000
MAX_REPORTED_ERRORS = 50
# A CSV header's name (in any case) for the column of the recipients' addresses.
ADDRESS_COLUMNS = frozenset({"address", "email"})

_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,63}"
PLACEHOLDER = re.compile(r"\{\{\s*(" + _NAME + r")\s*\}\}")
_NAME_ONLY = re.compile(_NAME)
# Anything that looks like template syntax but is not a plain placeholder.
_STRAY = re.compile(r"\{\{|\}\}|\{%|%\}|\{#|#\}")
# Control characters other than TAB and LF (CR is normalised away before this check), C1 too.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# What a value that begins a URL attribute may be: the scheme is all that matters, and it must be
# the first thing (the URL parser would drop a leading space or a tab inside "java\tscript:").
_SAFE_URL = re.compile(r"(?:https?://[^\s/?#\\]|mailto:\S)", re.IGNORECASE)


@dataclass(frozen=True)
class RowError:
    """One refusal of an upload's row. ``message`` is in the language active when it was made
    (the reader's: review's form, or the agent API's ``Accept-Language``)."""

    row: int  # 1-based row of the upload (for CSV: the line after the header is row 1)
    field: str
    message: str


class TemplateInvalid(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


class RecipientsInvalid(ValueError):
    def __init__(self, errors: list[RowError], total: int):
        super().__init__(f"{total} recipient rows are invalid")
        self.errors = errors[:MAX_REPORTED_ERRORS]
        self.total = total


@dataclass(frozen=True)
class Recipient:
    row: int
    address: str
    variables: dict[str, str]


def placeholders(field: str, template: str) -> set[str]:
    """The variable names a template uses; TemplateInvalid for any other template syntax."""
    stray = _STRAY.search(PLACEHOLDER.sub("", template))
    if stray:
        raise TemplateInvalid(
            field,
            _(
                "%(field)s: only {{ name }} placeholders are allowed (letters, digits and _); "
                "found %(found)s outside one."
            )
            % {"field": field, "found": repr(stray.group())},
        )
    return set(PLACEHOLDER.findall(template))


def is_variable_name(name) -> bool:
    return isinstance(name, str) and _NAME_ONLY.fullmatch(name) is not None


def render(template: str, variables: dict[str, str], *, escape: bool = False) -> str:
    def value(match: re.Match) -> str:
        text = variables[match.group(1)]
        return html_lib.escape(text, quote=True) if escape else text

    return PLACEHOLDER.sub(value, template)


def rendered_message(
    *, subject: str, text: str, html: str, variables: dict[str, str]
) -> tuple[str, str, str]:
    return (
        render(subject, variables),
        render(text, variables),
        render(html, variables, escape=True),
    )


@dataclass(frozen=True)
class Limit:
    """A template part's length without its placeholders, how often each name appears in it,
    and the most its rendering may hold: the length of one recipient's message is known from
    their variables without rendering it."""

    field: str
    base: int
    counts: dict[str, int]
    escape: bool
    most: int

    @classmethod
    def of(cls, field: str, template: str, *, most: int, escape: bool = False) -> Limit:
        counts = Counter(match.group(1) for match in PLACEHOLDER.finditer(template))
        return cls(field, len(PLACEHOLDER.sub("", template)), dict(counts), escape, most)

    def rendered_length(self, variables: dict[str, str]) -> int:
        def length(text: str) -> int:
            return len(html_lib.escape(text, quote=True)) if self.escape else len(text)

        return self.base + sum(n * length(variables[name]) for name, n in self.counts.items())


def filled_only_by(template: str) -> set[str] | None:
    """The placeholders whose values are all ``template`` holds besides white space, or None when
    it holds text of its own. It renders blank exactly when each of these values is blank (white
    space escaped as HTML is still white space): no rendering needed to tell, per row."""
    if PLACEHOLDER.sub("", template).strip():
        return None
    return set(PLACEHOLDER.findall(template))


def _clean_value(value) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value.replace("\r\n", "\n").replace("\r", "\n")
    return None


def _row_variables(
    row: int, raw, used: set[str], in_subject: set[str], in_url: Collection[str]
) -> tuple[dict, list]:
    errors: list[RowError] = []
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return {}, [RowError(row, "variables", _("variables must be an object of names to text"))]
    if len(raw) > MAX_VARIABLES:
        errors.append(
            RowError(row, "variables", _("at most %(n)s variables per row") % {"n": MAX_VARIABLES})
        )
    out: dict[str, str] = {}
    for name, value in raw.items():
        if not is_variable_name(name):
            message = _("%(name)s is not a variable name") % {"name": repr(str(name)[:40])}
            errors.append(RowError(row, "variables", message))
            continue
        if isinstance(value, float):
            # The float JSON parsed, not what the agent wrote: 19.90 was sent as 19.9, 1E2 as
            # 100.0, a long reference as 1.2345678901234567e+19. Only a whole number is exact.
            message = _(
                "a number with a decimal point or an exponent would read %(shown)s in the "
                "message: write it as text, as it should read"
            ) % {"shown": str(value)}
            errors.append(RowError(row, f"variables.{name}", message))
            continue
        text = _clean_value(value)
        if text is None:
            errors.append(RowError(row, f"variables.{name}", _("must be text or a number")))
            continue
        if len(text) > MAX_VARIABLE_VALUE:
            message = _("longer than %(n)s characters") % {"n": MAX_VARIABLE_VALUE}
            errors.append(RowError(row, f"variables.{name}", message))
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            errors.append(RowError(row, f"variables.{name}", _("holds an unpaired surrogate")))
            continue
        if _CONTROL.search(text):
            errors.append(RowError(row, f"variables.{name}", _("holds a control character")))
            continue
        if name in in_subject and (line_break := line_break_in(text)):
            message = _("is used in the subject and holds %(what)s") % {"what": line_break}
            errors.append(RowError(row, f"variables.{name}", message))
            continue
        if name in in_url and not _SAFE_URL.match(text):
            errors.append(
                RowError(
                    row,
                    f"variables.{name}",
                    _(
                        "begins a link or image address in the HTML and must be an http(s) or "
                        "mailto URL"
                    ),
                )
            )
            continue
        out[name] = text
    refused = {e.field for e in errors}
    for name in sorted(used - out.keys()):
        if f"variables.{name}" not in refused:
            message = _("the template uses {{ %(name)s }}, not given") % {"name": name}
            errors.append(RowError(row, f"variables.{name}", message))
    return out, errors


def clean_recipients(
    rows: list[tuple[int, object, object]],
    *,
    used: set[str],
    in_subject: set[str],
    max_recipients: int,
    limits: tuple[Limit, ...] = (),
    subject: str | None = None,
    body: tuple[str, str] | None = None,
    in_url: Collection[str] = (),
    own: str | None = None,
) -> list[Recipient]:
    """Validated recipients from (row number, address, variables) triples, or RecipientsInvalid
    listing every bad row (the first MAX_REPORTED_ERRORS of them).

    ``subject``: the subject template, which no row may render blank.
    ``body``: the text and HTML templates, which no row may render both blank.
    ``in_url``: the placeholders that begin a URL attribute of the HTML (``broadcast_html``).
    ``own``: the sending mailbox's address (``intents.policy.own_address``), refused as a row as
    a draft's recipient is: the worker blocks that send (a mail loop), and the approver read a
    page that said every recipient may be written to.
    ``limits``: the most each part may hold once this row's variables fill it in. Without them
    a template of 200,000 placeholders and 2,000-character values rendered to gigabytes when a
    reviewer opened the broadcast's sample, in the web process that serves every tenant."""
    if not rows:
        raise RecipientsInvalid(
            [RowError(0, "recipients", _("at least one recipient is needed"))], 1
        )
    if len(rows) > max_recipients:
        raise too_many_recipients(max_recipients, len(rows))
    # The values that alone make the body, when neither template has text of its own.
    fills = [filled_only_by(template) for template in body or ()]
    body_of: set[str] | None = None
    if fills and None not in fills:
        body_of = {name for names in fills if names is not None for name in names}
    errors: list[RowError] = []
    total = 0
    seen: dict[str, tuple[int, str]] = {}
    out: list[Recipient] = []
    for row, raw_address, raw_variables in rows:
        if isinstance(raw_address, str) and (stray := _stray_in_address(row, raw_address)):
            total += _keep(errors, [stray])
            continue
        try:
            address = normalize_address(raw_address)  # type: ignore[arg-type]
        except ValueError as exc:
            total += _keep(errors, [RowError(row, "address", str(exc))])
            continue
        # A string, or normalize_address refused it; named as written, white space left out.
        written = str(raw_address).strip()
        if (problem := _duplicate(row, written, address, seen)) is not None:
            total += _keep(errors, [problem])
            continue
        if own is not None and is_own_address(address, own):
            total += _keep(errors, [RowError(row, "address", own_mailbox_refusal(address))])
            continue
        variables, problems = _row_variables(row, raw_variables, used, in_subject, in_url)
        if not problems:
            problems = _rendered_problems(row, variables, limits, subject, body_of)
        if problems:
            total += _keep(errors, problems)
            continue
        out.append(Recipient(row, address, variables))
    if total:
        raise RecipientsInvalid(errors, total)
    return out


def _stray_in_address(row: int, written: str) -> RowError | None:
    """The refusal of an address holding a line break, a control character or white space other
    than a space (``stray_character_refusal``): ``normalize_address`` strips it around the
    address, so "ana@example.com\\r\\n" in a row or a CSV cell was stored as another string
    than the uploader sent, without a word, where a draft's recipient refuses it."""
    if (message := stray_character_refusal(written, field="address")) is None:
        return None
    return RowError(row, "address", message)


def too_many_recipients(most: int, given: int) -> RecipientsInvalid:
    message = _("at most %(most)s recipients (%(n)s given)") % {"most": most, "n": given}
    return RecipientsInvalid([RowError(0, "recipients", message)], 1)


def _rendered_problems(
    row: int,
    variables: dict[str, str],
    limits: tuple[Limit, ...],
    subject: str | None,
    body_of: set[str] | None,
) -> list[RowError]:
    """What this row's message would be wrong in once its variables fill the templates in: a
    part longer than its limit, or, like a draft's, an empty subject or no body at all."""
    too_long = [
        RowError(
            row,
            limit.field,
            _(
                "with this row's variables the %(field)s is %(n)s characters long; "
                "at most %(most)s are allowed"
            )
            % {"field": limit.field, "n": length, "most": limit.most},
        )
        for limit in limits
        if (length := limit.rendered_length(variables)) > limit.most
    ]
    if too_long:
        return too_long
    rendered_subject = "" if subject is None else render(subject, variables)
    if subject is not None and not rendered_subject.strip():
        # A draft needs a subject; so does every message of a broadcast.
        return [RowError(row, "subject", _("with this row's variables the subject is empty"))]
    if word := encoded_word_in(rendered_subject):
        # The customer's mail client shows it decoded (a draft's subject refuses one): a value
        # can hold a whole word, or complete one the template begins.
        message = _(
            "with this row's variables the subject holds the encoded word %(word)s, which a "
            "mail client shows decoded"
        ) % {"word": word}
        return [RowError(row, "subject", message)]
    if body_of is not None and not any(variables[name].strip() for name in body_of):
        # So does its body: "A text or HTML body is required" of a draft.
        return [RowError(row, "text", _("with this row's variables the message has no body"))]
    return []


def _duplicate(
    row: int, written: str, address: str, seen: dict[str, tuple[int, str]]
) -> RowError | None:
    """The refusal of an address already on an earlier row, naming both spellings as written
    (white space around them left out), or None after noting it. Compared as a draft's to, cc
    and bcc are (``same_recipient_key``), and refused in the same words."""
    key = same_recipient_key(address)
    if key not in seen:
        seen[key] = (row, written)
        return None
    first_row, first = seen[key]
    if first == written:
        message = _("%(address)s is also on row %(row)s") % {"address": written, "row": first_row}
        return RowError(row, "address", message)
    message = _("%(address)s is the same address as %(first)s on row %(row)s") % {
        "address": written,
        "first": first,
        "row": first_row,
    }
    return RowError(row, "address", message)


def _keep(errors: list[RowError], problems: list[RowError]) -> int:
    """Keep what will be reported (the first MAX_REPORTED_ERRORS), count everything: 10,000 bad
    rows must not hold 10,000 error objects, let alone one per missing variable each."""
    errors.extend(problems[: max(0, MAX_REPORTED_ERRORS - len(errors))])
    return len(problems)


def parse_csv(text: str, *, most: int | None = None) -> list[tuple[int, object, object]]:
    """Rows of a CSV upload: a header naming ``address`` (or ``email``) and the variables.
    ``most``: the recipients a broadcast may have; the rows past it are checked and counted, not
    kept, and the count refused. Kept, the 5 MB a CSV may carry made 390,000 rows of variables
    (over 100 MB of the web worker) for a list refused by its length."""
    if "\x00" in text:
        raise RecipientsInvalid([RowError(0, "recipients", _("the CSV holds a NUL character"))], 1)
    # A spreadsheet's UTF-8 export starts with a byte order mark; left in, it made a quoted
    # first column's name U+FEFF and both quotes. Strict: read leniently, a quote left open ran
    # to the end of the file (every later row became one value's text, and those recipients
    # were dropped without a word), and text after a closing quote was kept without the quotes.
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline=""), strict=True)
    try:
        header = next(reader)
    except StopIteration:
        raise RecipientsInvalid([RowError(0, "recipients", _("the CSV is empty"))], 1) from None
    except csv.Error as exc:
        raise RecipientsInvalid([_unreadable(exc)], 1) from None
    names, column = _csv_header(header)
    unnamed = [i for i, name in enumerate(names) if not name]
    rows: list[tuple[int, object, object]] = []
    errors: list[RowError] = []
    total = 0
    given = 0
    for number in itertools.count(1):
        try:
            values = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            # Named by the row it began in; what follows cannot be told apart reliably.
            total += _keep(errors, [_unreadable(exc, row=number)])
            break
        if not any(v.strip() for v in values):
            continue
        if len(values) != len(names):
            # Refused, not read as a row without variables: an unquoted comma in a value
            # shifts every later cell, and the values would be dropped without a word.
            message = _(
                "has %(n)s fields, the header %(header)s (quote a value that holds a comma)"
            ) % {"n": len(values), "header": len(names)}
            total += _keep(errors, [RowError(number, "columns", message)])
            continue
        if (filled := next((i for i in unnamed if values[i].strip()), None)) is not None:
            message = _(
                "has a value in column %(n)s, which the header leaves without a name: name the "
                "column, or empty it"
            ) % {"n": filled + 1}
            total += _keep(errors, [RowError(number, "columns", message)])
            continue
        given += 1
        if most is not None and given > most:
            continue
        variables = {
            n: v for i, (n, v) in enumerate(zip(names, values, strict=True)) if i != column and n
        }
        rows.append((number, values[column], variables))
    if total:
        raise RecipientsInvalid(errors, total)
    if most is not None and given > most:
        raise too_many_recipients(most, given)
    return rows


def _unreadable(exc: csv.Error, *, row: int = 0) -> RowError:
    # The csv module's reason stays as it says it (English): it names what it found.
    message = _("unreadable CSV: %(reason)s") % {"reason": exc}
    return RowError(row, "columns" if row else "recipients", message)


def _csv_header(header: list[str]) -> tuple[list[str], int]:
    """The header's column names and the address column's index, or the refusal."""
    if len(header) > MAX_VARIABLES + 1:
        # No row could carry so many variables; refused before the checks below, which
        # compare the columns with one another (250,000 of them took the web worker an hour).
        message = _(
            "the CSV header has %(n)s columns; at most %(most)s are allowed (the address and "
            "%(variables)s variables)"
        ) % {"n": len(header), "most": MAX_VARIABLES + 1, "variables": MAX_VARIABLES}
        raise RecipientsInvalid([RowError(0, "recipients", message)], 1)
    names = [h.strip().lstrip("\ufeff") for h in header]
    candidates = [i for i, n in enumerate(names) if n.lower() in ADDRESS_COLUMNS]
    if not candidates:
        raise RecipientsInvalid(
            [RowError(0, "recipients", _("the CSV header needs an 'address' column"))], 1
        )
    # A column with no name (a spreadsheet's trailing commas) is no variable: its values must
    # be empty (parse_csv), and two of them are no name given twice.
    repeated = sorted({n for n in names if n and names.count(n) > 1})
    if repeated:
        # A second column of the same name silently replaced the first one's values.
        message = _("the CSV header names %(name)s twice") % {"name": repr(repeated[0])}
        raise RecipientsInvalid([RowError(0, "recipients", message)], 1)
    if len(candidates) > 1:
        # Each is the address column by its name; the first was taken and the other kept as a
        # variable, whichever of them the uploader meant the messages to go to.
        first, second = (names[i] for i in candidates[:2])
        message = _(
            "the CSV header has two address columns, %(first)s and %(second)s; keep one"
        ) % {"first": repr(first), "second": repr(second)}
        raise RecipientsInvalid([RowError(0, "recipients", message)], 1)
    return names, candidates[0]


def leaf_hash(address: str, variables: dict[str, str]) -> str:
    document = [address, sorted([k, v] for k, v in variables.items())]
    raw = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(raw).hexdigest()


def recipients_digest(leaves_in_order) -> str:
    digest = hashlib.sha256()
    for leaf in leaves_in_order:
        digest.update(leaf.encode("ascii"))
        digest.update(b"\n")
    return digest.hexdigest()


def broadcast_hash(
    *, mailbox_id: int, subject: str, text: str, html: str, digest: str, count: int
) -> str:
    document = {
        "scheme": "broadcast-1",
        "mailbox_id": int(mailbox_id),
        "subject": subject,
        "text": text,
        "html": html,
        "recipients_digest": digest,
        "recipient_count": int(count),
    }
    raw = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def recipient_message_hash(
    *, mailbox_id: int, address: str, subject: str, text: str, html: str, variables: dict
) -> str:
    """The content hash (intents.hashing) of the one message this recipient receives."""
    subject, text, html = rendered_message(
        subject=subject, text=text, html=html, variables=variables
    )
    return message_content_hash(
        mailbox_id=mailbox_id,
        to=[address],
        cc=[],
        bcc=[],
        subject=subject,
        text=text,
        html=html,
        in_reply_to="",
    )


def broadcast_idempotency_key(*, tenant_id: int, broadcast_id: int, address: str) -> str:
    """Derived from the broadcast and the recipient, so it is the same on every fan-out run."""
    tag = hashlib.sha256(f"{broadcast_id}\n{address}".encode()).hexdigest()[:32]
    return f"cs-{tenant_id}-b{broadcast_id}-{tag}"
