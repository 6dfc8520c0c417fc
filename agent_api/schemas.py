"""Request and response shapes of the agent API (pydantic, via django-ninja).

Requests refuse unknown fields (``extra="forbid"``): a misspelt ``bcc`` must not silently drop
recipients. Strings and integers are strict (no ``123`` for a subject, no ``"5"`` for a priority),
and so are date-times (``DateTimeIn``: an RFC 3339 string, never a number read as a Unix time).
Addresses are syntax-checked here and passed on as written: the draft service stores them in
their one form (``common.addresses``), refuses a recipient named twice naming both spellings
(``duplicate_recipient``, as the reviewer's edit form does), and checks the mailbox's recipient
policy and the tenant's suppression list, naming the address it refuses.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    StrictInt,
    StrictStr,
    WithJsonSchema,
)

from common.addresses import stray_character_in
from intents.policy import normalize_address
from intents.services import MAX_RECIPIENTS, MAX_SUBJECT
from mailboxes.headers import line_break_in

MAX_TEXT = 200_000


def _address(value: str) -> str:
    # Checked, not replaced by its normal form: the service's refusal of a recipient named twice
    # names the spellings the agent sent. Spaces around it pass; other white space does not
    # (normalize_address would strip it unsaid).
    if found := stray_character_in(value):
        raise ValueError(
            f"holds {found}: an address may hold no line break, control character or white "
            "space other than a space"
        )
    normalize_address(value)
    return value


# RFC 3339 section 5.6 date-time ("T" and "Z" in either case, any number of fraction digits, an
# offset of at most 23:59 with its colon). Checked here rather than by pydantic's datetime, whose
# lax mode reads a number, or a string of digits, as a Unix time (``not_after: 5`` was 1970,
# refused as "in the past") and takes forms RFC 3339 does not (no seconds, a space or a comma).
# The analytics period's bounds (agent_api.routes_analytics) read their date-times with it too.
DATE_TIME = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}):(\d{2})(?:\.(\d+))?"
    r"([Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)",
    re.ASCII,
)
WITHOUT_ZONE = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?", re.ASCII)
DATE_TIME_EXAMPLE = "2027-01-31T17:00:00Z"


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number (a Unix time is not accepted)"
    if isinstance(value, list):
        return "an array"
    return "an object"


def parse_date_time(value: Any) -> datetime:
    """An aware datetime from an RFC 3339 date-time string. Digits past the microsecond, which
    PostgreSQL does not keep, are cut: the instant moves earlier by less than a microsecond,
    never later."""
    expected = f"must be an RFC 3339 date-time string with a time zone, such as {DATE_TIME_EXAMPLE}"
    if not isinstance(value, str):
        raise ValueError(f"{expected}, not {_json_kind(value)}")
    shown = repr(value[:40])
    match = DATE_TIME.fullmatch(value)
    if match is None:
        if WITHOUT_ZONE.fullmatch(value):
            raise ValueError(f"{expected}; {shown} names no time zone (Z or an offset like +01:00)")
        raise ValueError(f"{expected}; {shown} is not one")
    day, minutes, seconds, fraction, offset = match.groups()
    if seconds == "60":
        raise ValueError(f"{expected}; {shown} is a leap second, which cannot be stored: use :59")
    fraction = f".{fraction[:6]}" if fraction else ""
    try:
        return datetime.fromisoformat(f"{day}T{minutes}:{seconds}{fraction}{offset.upper()}")
    except ValueError as exc:
        # A month 13, a 30 February, a 25th hour.
        raise ValueError(f"{expected}; {shown} is no such instant ({exc})") from None


# A number in a path or a query string (an id, a page's limit): ASCII digits as the API writes
# them. pydantic's lax integer also read "1_0" as 10 and "+1", "1.0", " 1" and "01" as 1, so
# an agent that mangled a draft's id read, revised or withdrew another draft, told nothing.
DIGITS = re.compile(r"0|[1-9][0-9]*", re.ASCII)


def _written_in_digits(value: Any) -> Any:
    if isinstance(value, str) and not DIGITS.fullmatch(value):
        raise ValueError(
            "must be written in ASCII digits, as the API gives it (no sign, space, underscore, "
            "fraction or leading zero)"
        )
    return value


DigitsInt = Annotated[int, BeforeValidator(_written_in_digits)]


DateTimeIn = Annotated[
    datetime,
    PlainValidator(parse_date_time),
    WithJsonSchema({"type": "string", "format": "date-time", "examples": [DATE_TIME_EXAMPLE]}),
]


def _single_line(value: str) -> str:
    if line_break := line_break_in(value):
        raise ValueError(f"must be a single line; it holds {line_break}")
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


Address = Annotated[
    StrictStr,
    Field(max_length=254, json_schema_extra={"format": "email"}),
    AfterValidator(_address),
]
Subject = Annotated[
    StrictStr,
    Field(min_length=1, max_length=MAX_SUBJECT),
    AfterValidator(_single_line),
    AfterValidator(_not_blank),
]
Body = Annotated[StrictStr, Field(max_length=MAX_TEXT)]
MessageRef = Annotated[StrictStr, Field(max_length=998), AfterValidator(_single_line)]
ThreadRef = Annotated[StrictStr, Field(max_length=255), AfterValidator(_single_line)]


def _mailbox_ref(value: Any) -> int | str:
    # One validator instead of an int | str union, so an error names `mailbox`, not a union arm.
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("must be a mailbox id (integer) or its address (string)")
    if isinstance(value, str) and not 1 <= len(value) <= 254:
        raise ValueError("must be 1-254 characters")
    return value


MailboxRef = Annotated[
    int | str,
    PlainValidator(_mailbox_ref),
    WithJsonSchema(
        {
            "oneOf": [
                {"type": "integer", "minimum": 1},
                {"type": "string", "minLength": 1, "maxLength": 254},
            ],
            "description": "The mailbox to send from: our numeric id or its email address.",
            "examples": ["support@acme.agentmail.to", 12],
        }
    ),
]


class StrictIn(Schema):
    model_config = ConfigDict(extra="forbid")


class AttachmentIn(StrictIn):
    filename: StrictStr = Field(
        max_length=255,
        description=(
            "The file's name as the customer sees it; no path separators, control characters "
            'or characters Windows refuses in a file name (" < > | ? * :).'
        ),
        examples=["invoice-1042.pdf"],
    )
    content_type: StrictStr = Field(max_length=255, examples=["application/pdf"])
    content: StrictStr = Field(
        description=(
            "The file's bytes, base64 (standard alphabet, padded; line breaks are ignored). "
            "Limits per file and per draft are in the API description."
        )
    )


ONCE = (
    "Each recipient once across `to`, `cc` and `bcc`, in any spelling (case, the domain in "
    "Unicode or punycode): a repeat is 422 `duplicate_recipient` naming both spellings."
)


class ContentIn(StrictIn):
    to: list[Address] = Field(min_length=1, max_length=MAX_RECIPIENTS, description=ONCE)
    cc: list[Address] = Field(default_factory=list, max_length=MAX_RECIPIENTS, description=ONCE)
    bcc: list[Address] = Field(default_factory=list, max_length=MAX_RECIPIENTS, description=ONCE)
    subject: Subject | None = Field(
        None,
        description=(
            "Required for a new message. A reply (`in_reply_to`) gets the subject AgentMail gives "
            'it, "Re: " and the subject of the message it answers: leave it out or send exactly that.'
        ),
    )
    text: Body = Field(
        "", description="Plain-text body. `text`, `html` or both: a draft with neither is 422."
    )
    html: Body = Field(
        "", description="HTML body. `text`, `html` or both: a draft with neither is 422."
    )
    attachments: list[AttachmentIn] | None = Field(
        None,
        max_length=100,
        description=(
            "Files sent with the reply, approved with it (the content hash covers each file's "
            "name, type and SHA-256). On a revision, leaving this and `forward_attachments` "
            "out keeps the current version's files; giving either makes the new version's "
            "files these followed by the forwarded ones; an empty list removes them."
        ),
    )
    forward_attachments: list[Annotated[StrictStr, Field(min_length=1, max_length=255)]] = Field(
        default_factory=list,
        max_length=100,
        description=(
            "Attachment ids (`attachments[].attachment_id` of AgentMail's Message) of the "
            "customer's message this draft answers (`in_reply_to`), to send back with the reply. "
            "They are fetched from AgentMail and checked like uploaded files, and come after "
            "`attachments`. On a revision they replace the current version's files with "
            "`attachments` and these (see `attachments`)."
        ),
    )


class DraftCreateIn(ContentIn):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "mailbox": "support@acme.agentmail.to",
                    "to": ["customer@example.com"],
                    "subject": "Re: Where is my order?",
                    "text": "Hello, your order shipped yesterday; tracking number 1Z999.",
                    "in_reply_to": "<CAF=abc@mail.example.com>",
                    "provenance": {"model": "gpt-x", "prompt": "support-v3"},
                }
            ]
        },
    )

    mailbox: MailboxRef
    in_reply_to: MessageRef = Field("", description="Provider message id this replies to.")
    thread_id: ThreadRef = Field(
        "",
        description=(
            "Replies only: the thread of the message in `in_reply_to` (filled in when left out; "
            "another thread is 422). A new message starts its own thread: with `thread_id` but "
            "no `in_reply_to` it is 422 `thread_id_without_in_reply_to`."
        ),
    )
    provenance: dict[str, Any] | None = Field(
        None, description="What produced the draft (model, prompt version, sources); ≤ 16 KiB."
    )
    not_after: DateTimeIn | None = Field(
        None,
        description=(
            "Do not send after this instant: an RFC 3339 date-time string with a time zone "
            "(`2027-01-31T17:00:00Z`, `2027-01-31T18:00:00+01:00`), at most 366 days ahead. "
            "A number (a Unix time), a date alone or a time without a zone is 422 naming "
            "`not_after`."
        ),
    )
    priority: StrictInt = Field(0, ge=-100, le=100)


class VersionIn(ContentIn):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "to": ["customer@example.com"],
                    "subject": "Re: Where is my order?",
                    "text": "Hello again: the parcel arrives tomorrow.",
                    "base_version": 1,
                }
            ]
        },
    )

    base_version: Annotated[StrictInt, Field(ge=1)] | None = Field(
        None,
        description=(
            "The `current_version.number` this revision was written from. If the draft moved on "
            "since (a person edited it), the revision is refused with 409 `version_conflict` and "
            "nothing is written: read the draft again and revise the current version. Omitted: "
            "the revision is added on top of whatever is current."
        ),
    )


class FieldError(Schema):
    field: str | None
    row: int | None = Field(
        default=None,
        description=(
            "Only in a broadcast's `recipients_invalid` errors: the recipient's number, counting "
            "from 1 (for `recipients_csv`, from the line after the header). `field` names a "
            "`recipients` item by its 0-based index, as every error names an array's item "
            "(`recipients[1].address` is row 2), and a CSV row by its column "
            "(`recipients_csv.address`, `recipients_csv.variables.name`)."
        ),
    )
    message: str


class Problem(Schema):
    """RFC 9457 problem details."""

    type: str = Field(examples=["urn:countersign:problem:validation_failed"])
    title: str
    status: int
    detail: str
    code: str = Field(description="Stable slug; the last part of `type`.")
    errors: list[FieldError]


MailboxStatus = Literal["provisioning", "active", "disabled"]


class MailboxOut(Schema):
    id: int
    address: str
    display_name: str
    status: MailboxStatus


class MailboxList(Schema):
    items: list[MailboxOut]


class MailboxBrief(Schema):
    id: int
    address: str


class AttachmentOut(Schema):
    id: int
    filename: str
    content_type: str
    size: int
    sha256: str


class VersionOut(Schema):
    number: int
    to: list[str]
    cc: list[str]
    bcc: list[str]
    subject: str
    text: str
    html: str
    content_hash: str
    attachments: list[AttachmentOut]
    author: Literal["agent", "person"]
    created_at: datetime
    body_purged_at: datetime | None = Field(
        description="When the tenant's retention purge emptied `text` and `html` (the subject, "
        "recipients, attachments' names and `content_hash` remain); null while the body is kept."
    )


class DeliveryOut(Schema):
    address: str
    state: Literal["pending", "sent", "delivered", "bounced", "complained", "rejected"] = Field(
        description="`pending` until the provider reports on this recipient."
    )
    updated_at: datetime | None


class IntentOut(Schema):
    id: int
    state: Literal[
        "queued",
        "sending",
        "uncertain",
        "accepted",
        "needs_attention",
        "failed",
        "blocked",
        "expired",
        "cancelled",
    ]
    version: int
    approved_at: datetime
    provider_message_id: str
    provider_thread_id: str
    attempts: int
    updated_at: datetime
    deliveries: list[DeliveryOut]


DraftStatus = Literal["pending", "approved", "rejected", "expired", "withdrawn"]


class DraftOut(Schema):
    id: int
    status: DraftStatus
    mailbox: MailboxBrief
    thread_id: str
    in_reply_to: str
    priority: int
    provenance: dict[str, Any]
    not_after: datetime | None
    review_deadline: datetime | None
    reject_reason: str
    created_at: datetime
    updated_at: datetime
    decided_at: datetime | None
    current_version: VersionOut
    intent: IntentOut | None


class DraftSummary(Schema):
    id: int
    status: DraftStatus
    mailbox: MailboxBrief
    subject: str
    current_version: int
    intent_state: str | None
    created_at: datetime
    updated_at: datetime


class DraftPage(Schema):
    items: list[DraftSummary]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page."
    )
