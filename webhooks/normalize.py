"""AgentMail webhook payloads → our vocabulary (reference §5.2, §5.3).

Tolerant of the documented variations: ``from`` as a string or ``from_`` as a list, recipients as
strings (with or without a display name) or as ``{"address", "status"}`` objects, the event object
under its documented key or flattened into the payload, timestamps as ISO strings or epoch
seconds; and of a sender as an ``{"address", "name"}`` object. Unknown event types are kept (kind
``other``) and ignored by the applier.

NUL and unpaired UTF-16 surrogates (``\\u0000``, ``\\ud800``) become U+FFFD REPLACEMENT CHARACTER in
every string and key, before anything else, and the ledger payload records how many
(``replaced_characters``). PostgreSQL stores neither in text nor in jsonb, so keeping them would
lose the whole event; and neither can be part of the mail itself (RFC 5322 and MIME forbid NUL,
UTF-8 cannot encode a surrogate): they exist only as escapes in the JSON, so replacing them, as
a UTF-8 decoder would, loses nothing of the message. This is one-way on purpose: the ledger keeps
only metadata (no bodies) and must stay storable and re-applicable as it is. The one exception is
a received message's subject: an RFC 2047 encoded word can carry a NUL, and AgentMail builds a
reply's subject from the subject it holds, so such a message is flagged (``SUBJECT_REPLACED``) and
a reply to it is refused rather than approved with a subject it would not be sent with.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import getaddresses, parseaddr
from enum import StrEnum
from typing import Any

from common.addresses import normalize_address
from webhooks.models import MESSAGE_ID_BYTES

PREVIEW_LENGTH = 200
REPLACEMENT_CHARACTER = "\ufffd"
# In a Python str a surrogate code point is always unpaired: json.loads joins valid pairs.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# A bare dot-atom address, as AgentMail sends recipients: parseaddr would return it unchanged,
# for about 25 µs per address (the receiver's and the applier's normalising of every delivery
# event). tests/webhooks/test_normalize_addresses.py checks the two agree on every such string.
_BARE_ADDRESS = re.compile(
    r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*"
)


class Kind(StrEnum):
    SENT = "sent"
    DELIVERED = "delivered"
    BOUNCED = "bounced"
    COMPLAINED = "complained"
    REJECTED = "rejected"
    RECEIVED = "received"
    OTHER = "other"


# event type → (our kind, key of the event object in the payload)
_TYPES: dict[str, tuple[Kind, str]] = {
    "message.sent": (Kind.SENT, "send"),
    "message.delivered": (Kind.DELIVERED, "delivery"),
    "message.bounced": (Kind.BOUNCED, "bounce"),
    "message.complained": (Kind.COMPLAINED, "complaint"),
    "message.rejected": (Kind.REJECTED, "reject"),
    "message.received": (Kind.RECEIVED, "message"),
}
DELIVERY_KINDS = frozenset(
    {Kind.SENT, Kind.DELIVERED, Kind.BOUNCED, Kind.COMPLAINED, Kind.REJECTED}
)

# Set (true) on a received message whose subject held NUL or an unpaired surrogate, and kept in
# the ledger's payload (the applier normalizes that again): its stored subject, with U+FFFD, is
# not the one AgentMail's reply route would send ("Re: " and the NUL).
SUBJECT_REPLACED = "cs_subject_replaced"


# Only metadata survives into the ledger: bodies, headers and attachments of received mail never do.
_KEPT_MESSAGE_FIELDS = (
    "inbox_id",
    "thread_id",
    "message_id",
    "timestamp",
    "from",
    "from_",
    "to",
    "cc",
    "subject",
    "labels",
    "in_reply_to",
    SUBJECT_REPLACED,
)
# Kept as ``Inbound.reply_to`` reads it (at most MAX_REPLY_TO addresses), not as it came.
_REPLY_TO = "reply_to"
_KEPT_THREAD_FIELDS = ("inbox_id", "thread_id", "message_count", "last_message_id")


@dataclass(frozen=True)
class Inbound:
    sender: str
    subject: str
    preview: str
    in_reply_to: str
    subject_replaced: bool = False
    reply_to: tuple[str, ...] = ()


@dataclass(frozen=True)
class NormalizedEvent:
    kind: Kind
    event_type: str
    event_id: str
    inbox_id: str
    message_id: str
    thread_id: str
    occurred_at: datetime | None
    recipients: tuple[str, ...] = ()
    bounce_type: str = ""
    reason: str = ""
    inbound: Inbound | None = None
    minimal_payload: dict = field(default_factory=dict)


def normalize(payload: dict) -> NormalizedEvent:
    payload, replaced = storable(_flag_replaced_subject(payload))
    event = _normalize(payload)
    if replaced:
        event.minimal_payload["replaced_characters"] = replaced
    return event


def _flag_replaced_subject(payload: dict) -> dict:
    """``payload`` with ``SUBJECT_REPLACED`` set on its message if the subject holds what
    ``storable`` replaces; the message is the ``message`` object or, flattened, the payload."""
    nested = isinstance(payload.get("message"), dict)
    message = payload["message"] if nested else payload
    subject = message.get("subject")
    if not (isinstance(subject, str) and _UNSTORABLE.search(subject)):
        return payload
    flagged = {**message, SUBJECT_REPLACED: True}
    return {**payload, "message": flagged} if nested else flagged


def storable(value: Any) -> tuple[Any, int]:
    """``value`` with NUL and unpaired surrogates replaced by U+FFFD in every string and key, and
    how many were replaced. Depth is bounded by the receiver (``MAX_JSON_DEPTH``)."""
    if isinstance(value, str):
        return _UNSTORABLE.subn(REPLACEMENT_CHARACTER, value)
    if isinstance(value, list):
        items = [storable(item) for item in value]
        return [item for item, _ in items], sum(n for _, n in items)
    if isinstance(value, dict):
        out: dict = {}
        replaced = 0
        for key, item in value.items():
            key, in_key = storable(key)
            out[key], in_item = storable(item)
            replaced += in_key + in_item
        return out, replaced
    return value, 0


def _normalize(payload: dict) -> NormalizedEvent:
    event_type = _text(payload.get("event_type"))[:64]
    kind, key = _TYPES.get(event_type, (Kind.OTHER, ""))
    obj = _event_object(payload, key)
    raw_thread = payload.get("thread")
    thread: dict = raw_thread if isinstance(raw_thread, dict) else {}
    message_id = _text(obj.get("message_id") or payload.get("message_id"))
    inbox_id = _text(obj.get("inbox_id") or payload.get("inbox_id") or thread.get("inbox_id"))
    thread_id = _text(obj.get("thread_id") or payload.get("thread_id") or thread.get("thread_id"))
    common: dict[str, Any] = {
        "kind": kind,
        "event_type": event_type,
        "event_id": _text(payload.get("event_id"))[:100],
        "inbox_id": inbox_id.lower()[:254],
        "message_id": bounded_id(message_id),
        "thread_id": bounded_thread_id(thread_id),
        "occurred_at": _timestamp(obj.get("timestamp") or payload.get("timestamp")),
    }
    if kind is Kind.RECEIVED:
        return NormalizedEvent(
            **common,
            inbound=_inbound(obj),
            minimal_payload=_minimal_received(payload, obj, thread),
        )
    if kind is Kind.OTHER:
        # Unknown types are kept for audit, but nothing of their content is needed.
        return NormalizedEvent(
            **common, minimal_payload={"type": payload.get("type"), "event_type": event_type}
        )
    return NormalizedEvent(
        **common,
        recipients=_addresses(obj.get("recipients")),
        bounce_type=_text(obj.get("type"))[:40] if kind is Kind.BOUNCED else "",
        reason=_text(obj.get("reason") or obj.get("sub_type"))[:200],
        minimal_payload={
            "type": payload.get("type"),
            "event_type": event_type,
            "event_id": payload.get("event_id"),
            key: obj,
            **_top_level_ids(payload),
        },
    )


# A message id is indexed (the ledger's waiting index, the inbound unique key), and PostgreSQL
# refuses an index entry over about 2,700 bytes: 998 characters of a sender-chosen Message-ID in
# a three-byte script are 2,994. The cut is in bytes (``MESSAGE_ID_BYTES``), and a cut id ends
# in a digest of the whole.


def bounded_id(value: str) -> str:
    """``value`` if its UTF-8 fits ``MESSAGE_ID_BYTES``; else the longest prefix that leaves room,
    ``~`` and 16 hex digits of the whole id's SHA-256 (the same id always cuts the same way, and
    two ids that share the prefix stay apart)."""
    encoded = value.encode("utf-8")
    if len(encoded) <= MESSAGE_ID_BYTES:
        return value
    digest = hashlib.sha256(encoded).hexdigest()[:16]
    prefix = encoded[: MESSAGE_ID_BYTES - 17].decode("utf-8", "ignore")
    return f"{prefix}~{digest}"


# What InboundMessage.thread_id holds (and a draft's, which is the answered message's).
THREAD_ID_KEPT = 255


def bounded_thread_id(value: str) -> str:
    """``value`` if it fits ``THREAD_ID_KEPT`` characters; else the longest prefix that leaves
    room, ``~`` and 16 hex digits of the whole id's SHA-256. A plain cut made two threads whose
    ids share their first 255 characters one: each one's reviewer saw the other's conversation,
    and mail in one held the other's sends."""
    if len(value) <= THREAD_ID_KEPT:
        return value
    digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:16]
    return f"{value[: THREAD_ID_KEPT - 17]}~{digest}"


# What InboundMessage.subject holds: one character more than a draft's subject may have (998,
# intents' MAX_SUBJECT), so a longer one stays too long to reply to. Cut at 998, a long subject
# starting "Re: " kept the prefix and fitted: a reply was approved with the cut subject, and
# AgentMail would have sent the whole one (its reply route takes the answered message's subject).
SUBJECT_KEPT = 999


# What InboundMessage.sender holds. Only a display name makes a sender longer (an address has
# at most 254 characters), and the address comes last ("Name <address>"): a plain cut kept a
# long name and dropped the address, so the reviewer saw whatever the name claimed to be
# ("support@acme.test <support@acme.test> ...") and never who wrote.
MAX_SENDER = 320
_SENDER_HEAD = 60


def bounded_sender(sender: str) -> str:
    """``sender`` if it fits ``MAX_SENDER``; else its first ``_SENDER_HEAD`` characters, an
    ellipsis and as much of its end as fits, which holds the address."""
    if len(sender) <= MAX_SENDER:
        return sender
    return sender[:_SENDER_HEAD] + "\u2026" + sender[-(MAX_SENDER - _SENDER_HEAD - 1) :]


def address_of(value: Any) -> str:
    """The bare address of ``"Jane <jane@x.test>"``, ``jane@x.test`` or an object, in the one
    form approved recipients are stored in (``_address_in_its_form``: the domain as an A-label),
    or lower-cased when it is not a valid address. Only lower-cased, a bounce naming
    juergen@bücher.de (the Unicode spelling of the approved juergen@xn--bcher-kva.de) matched
    nobody, and nothing was suppressed. A bare ASCII address is that form lower-cased already."""
    if isinstance(value, dict):
        value = value.get("address") or value.get("email") or ""
    if not isinstance(value, str):
        return ""
    if _BARE_ADDRESS.fullmatch(value):
        return value.lower()
    written = _parsed_address(value).strip()
    address = _address_in_its_form(written) or written.lower()
    return address if "@" in address else ""


# email._parseaddr reads each "name:" group of an address list by calling itself for the next
# one, so a thousand of them ("a:a:a:...", 2 KB that a customer may write in a Reply-To) raise
# RecursionError, not the ValueError of other bad input: the receiver answered 500 to the signed
# event, and Svix retried it for a day. Such a text names nobody, as an ambiguous one does.


def _parsed_addresses(text: str) -> list[tuple[str, str]]:
    """``getaddresses([text])``, or nothing for a text nested too deep to read."""
    try:
        return getaddresses([text])
    except RecursionError:
        return []


def _parsed_address(text: str) -> str:
    """The address ``parseaddr`` reads in ``text``, or "" for a text nested too deep to read."""
    try:
        return parseaddr(text)[1]
    except RecursionError:
        return ""


def _addresses(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    seen: dict[str, None] = {}
    for item in items:
        if isinstance(item, str) and "," in item:
            candidates = [a for _, a in _parsed_addresses(item)]
        else:
            candidates = [item]
        for candidate in candidates:
            address = address_of(candidate)
            if address:
                seen.setdefault(address, None)
    return tuple(seen)


def _event_object(payload: dict, key: str) -> dict:
    obj = payload.get(key) if key else None
    if isinstance(obj, dict):
        return obj
    # Some senders flatten the object into the payload; fall back to the payload itself.
    return payload


def _inbound(message: dict) -> Inbound:
    sender = message.get("from")
    if not sender:
        sender = message.get("from_")
    if isinstance(sender, list):
        sender = sender[0] if sender else ""
    preview = _text(message.get("preview")) or _text(message.get("extracted_text"))
    if not preview:
        preview = _text(message.get("text"))
    sender = bounded_sender(sender_in_its_form(_sender_text(sender)))
    return Inbound(
        sender=sender,
        # Not stripped: AgentMail builds a reply's subject from the subject as it is ("Re: " and
        # the leading spaces), and the draft's approved subject must be that one.
        subject=_raw_text(message.get("subject"))[:SUBJECT_KEPT],
        # Stripped after the cut: normalizing the stored (minimal) payload again must give the
        # same preview, and the applier does exactly that.
        preview=" ".join(preview.split())[:PREVIEW_LENGTH].rstrip(),
        in_reply_to=_text(message.get("in_reply_to"))[:998],
        subject_replaced=message.get(SUBJECT_REPLACED) is True,
        reply_to=reply_to_others(message.get(_REPLY_TO), sender),
    )


# What InboundMessage.reply_to keeps of a Reply-To: its first addresses, enough for any real one.
MAX_REPLY_TO = 10


def reply_to_others(value: Any, sender: str) -> tuple[str, ...]:
    """The addresses a message's Reply-To asks replies to go to, other than its sender's: each
    in the one form a draft's recipients are stored in (one that is not a valid address as
    written, lower-cased), once, at most ``MAX_REPLY_TO``. AgentMail gives ``reply_to`` as a
    list (or a string) of "Name <address>" or addresses.

    An agent that answers where the message asks writes to an address that wrote nothing in
    the thread: the reviewer, told "Not a participant of this thread", must see that the
    message asked for it (and, when the reply goes to the sender, that it asked otherwise)."""
    items = value if isinstance(value, list) else [value]
    own = _own_address(sender)
    found: dict[str, None] = {}
    for item in items:
        if isinstance(item, dict):
            item = item.get("address") or item.get("email")
        if not isinstance(item, str):
            continue
        for written in _reply_to_addresses(item):
            written = written.strip()
            address = _address_in_its_form(written) or written.lower()
            if "@" in address and address != own:
                found.setdefault(bounded_sender(address), None)
            if len(found) >= MAX_REPLY_TO:
                return tuple(found)
    return tuple(found)


def _reply_to_addresses(item: str) -> list[str]:
    """The addresses one Reply-To item names. ``getaddresses`` reads "Name <address>", bare
    addresses, comments, groups and comma-separated lists; one it finds ambiguous it reads as
    nobody (``[("", "")]``, Python's guard against CVE-2023-27043). AgentMail writes an item as
    "name <address>" whatever the name holds, so "ceo@yourshop.test <evil@x.test>" (a display
    name that is itself an address) was such an item: the page said nothing of it, while an
    agent answering where the message asked wrote to evil@x.test. Such an item is read as a
    sender is (``_own_address``: the address in its last angle brackets), never by its name."""
    found = [written for _, written in _parsed_addresses(item) if written]
    if found or not (item.rstrip().endswith(">") and "<" in item):
        return found
    return [_own_address(item.rstrip())]


def _own_address(sender: str) -> str:
    """The address of a sender as ``sender_in_its_form`` wrote it (and ``on_thread`` reads it)."""
    if sender.endswith(">") and "<" in sender:
        sender = sender[:-1].rpartition("<")[2]
    return sender.strip().lower()


def sender_in_its_form(sender: str) -> str:
    """``sender`` with its address in the one form a draft's recipients are stored in
    (``common.addresses.normalize_address``: lower-cased, the domain as an A-label, NFC); the
    rest as given. The address is where ``intents.policy.on_thread`` reads it: the part in the
    last angle brackets when the sender ends with them, else the whole. One that is not a valid
    address stays as written (no recipient can match it either way).

    Every check of who wrote in a thread compares a recipient in that form with the sender's
    text (``on_thread``, its SQL twin in the queue, the answered message's author, forwarded
    files' sources): "Jürgen <juergen@bücher.de>", or an address in decomposed Unicode, was
    never the recipient juergen@xn--bcher-kva.de, so a reply to the customer who wrote was
    marked "Not a participant of this thread" and left out of approval from a list. Shown in
    that form too, a look-alike domain in a sender reads as what it is (``xn--...``), as it does
    among the recipients."""
    if sender.endswith(">") and "<" in sender:
        head, _, written = sender[:-1].rpartition("<")
        address = _address_in_its_form(written)
        return f"{head}<{address}>" if address else sender
    return _address_in_its_form(sender) or sender


def _address_in_its_form(written: str) -> str:
    """The address in its one form, or "" when it is not one."""
    try:
        return normalize_address(written)
    except ValueError:
        return ""


def _sender_text(value: Any) -> str:
    """The sender as stored: the string as given, or for an object ``{"address", "name"}`` (not
    what AgentMail documents, which is a string; it was stored empty) "name <address>", or the
    address alone. Only a bare address is taken from an object: one like ``a@x.test> <boss@y.test``
    would end the built sender with an address of the sender's choosing, which is the address
    the review page shows and ``intents.policy.on_thread`` matches."""
    if not isinstance(value, dict):
        return _text(value)
    address, name = _text(value.get("address") or value.get("email")), _text(value.get("name"))
    if not _BARE_ADDRESS.fullmatch(address):
        return ""
    return f"{name} <{address}>" if name else address


# What the ledger keeps of a received message's lists (to, cc, labels): the first ones, and how
# many there were under LEDGER_COUNTS. Nothing applies them; they say whom it was written to.
LEDGER_LIST_ITEMS = 20
_LEDGER_LISTS = ("to", "cc", "labels")
LEDGER_COUNTS = "cs_counts"


def _minimal_received(payload: dict, message: dict, thread: dict) -> dict:
    """The ledger's payload of a received message: its metadata, each field no longer than the
    applier reads of it when it normalizes the payload again (which must give the same inbound
    message). Kept whole, a message to five thousand addresses with a 100 KB subject was a
    quarter of a megabyte per event until the retention purge, for 999 characters stored."""
    kept = {k: message[k] for k in _KEPT_MESSAGE_FIELDS if k in message}
    inbound = _inbound(message)
    kept["preview"] = inbound.preview
    if inbound.reply_to:
        kept[_REPLY_TO] = list(inbound.reply_to)
    if "from" in kept or "from_" in kept:
        kept.pop("from_", None)
        kept["from"] = inbound.sender
    if isinstance(kept.get("subject"), str):
        kept["subject"] = inbound.subject
    if "in_reply_to" in kept:
        kept["in_reply_to"] = inbound.in_reply_to
    if isinstance(kept.get("message_id"), str):
        kept["message_id"] = bounded_id(_text(kept["message_id"]))
    counts = {}
    for name in _LEDGER_LISTS:
        value = kept.get(name)
        if isinstance(value, list) and len(value) > LEDGER_LIST_ITEMS:
            counts[name] = len(value)
            kept[name] = value[:LEDGER_LIST_ITEMS]
    if counts:
        kept[LEDGER_COUNTS] = counts
    return {
        "type": payload.get("type"),
        "event_type": payload.get("event_type"),
        "event_id": payload.get("event_id"),
        "message": kept,
        "thread": {k: thread[k] for k in _KEPT_THREAD_FIELDS if k in thread},
        **_top_level_ids(payload),
    }


# Read from the payload's top level when the event's object lacks them (_normalize): the applier
# normalizes the stored minimal payload again, so it must keep them, or an event stored with the
# right inbox would be applied as one naming no inbox.
_TOP_LEVEL_IDS = ("inbox_id", "message_id", "thread_id", "timestamp")


def _top_level_ids(payload: dict) -> dict:
    return {name: payload[name] for name in _TOP_LEVEL_IDS if name in payload}


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _raw_text(value: Any) -> str:
    return value if isinstance(value, str) else ""


# Timestamps outside these are not believed (None: the receipt time stands in): every page that
# shows one converts it to the reader's zone, which overflows next to the calendar's ends.
_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
_LATEST = datetime(9000, 1, 1, tzinfo=UTC)


def _timestamp(value: Any) -> datetime | None:
    parsed = parsed_timestamp(value)
    if parsed is None or not _EARLIEST <= parsed <= _LATEST:
        return None
    return parsed


def parsed_timestamp(value: Any) -> datetime | None:
    """A provider's timestamp (ISO text, naive read as UTC, or epoch seconds) in UTC; None when
    it is none of those or beyond what a datetime holds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(value, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed.tzinfo is None:
            return parsed.replace(tzinfo=UTC)
        try:
            # Year 1 east of UTC is year 0 in UTC: PostgreSQL stores it, no later read survives it.
            return parsed.astimezone(UTC)
        except OverflowError:
            return None
    return None
