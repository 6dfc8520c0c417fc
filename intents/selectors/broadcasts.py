"""Reads of broadcasts for the review pages and the agent API; always tenant-scoped (another
tenant's broadcast and a missing one raise the same NotFound)."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from django.db.models import BooleanField, Count, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KeyTextTransform
from django.utils.formats import number_format

from common.addresses import letters_beyond_ascii
from common.text import INVISIBLE_CHARACTERS, invisible_characters
from intents import broadcast_content
from intents.errors import InvalidInput, NotFound
from intents.hostnames import lookalike_hosts
from intents.html_links import filled_link_misleading, template_links
from intents.models import Broadcast, BroadcastRecipient, SendIntent
from intents.policy import SuppressedAs, lookalike_named, tenant_suppressed
from intents.selectors.common import Page, as_int, decode_cursor, encode_cursor
from intents.sending.throttle import broadcast_rate

SKIPPED_SHOWN = 200
MAX_ID = 2**63 - 1


def broadcasts_of(*, tenant, mailbox_ids: set[int] | None = None) -> QuerySet[Broadcast]:
    """The tenant's broadcasts, newest first (``mailbox_ids``: only those mailboxes')."""
    qs = Broadcast.objects.filter(tenant=tenant).select_related(
        "mailbox", "approved_by", "decided_by"
    )
    if mailbox_ids is not None:
        qs = qs.filter(mailbox_id__in=mailbox_ids)
    return qs.order_by("-created_at", "-id")


def broadcasts_page(*, tenant, cursor: str | None = None, limit: int = 100) -> Page:
    """The tenant's broadcasts, newest first (by id), ``limit`` of them after ``cursor`` (the
    ``next_cursor`` of the page before; InvalidInput for one that is not)."""
    qs = broadcasts_of(tenant=tenant)
    if cursor:
        (raw,) = decode_cursor(cursor, 1)
        if not raw.isascii() or not raw.isdigit() or not 0 < int(raw) <= MAX_ID:
            raise InvalidInput("cursor_invalid", "The cursor is not valid.", "cursor")
        qs = qs.filter(pk__lt=int(raw))
    rows = list(qs.order_by("-id")[: limit + 1])
    if len(rows) <= limit:
        return Page(rows, None, limit)
    return Page(rows[:limit], encode_cursor(rows[limit - 1].pk), limit)


def broadcast_get(*, tenant, broadcast_id, mailbox_ids: set[int] | None = None) -> Broadcast:
    found = broadcasts_of(tenant=tenant, mailbox_ids=mailbox_ids).filter(
        pk=as_int(broadcast_id, "broadcast")
    )
    broadcast = found.first()
    if broadcast is None:
        raise NotFound("not_found", "No such broadcast.")
    return broadcast


SkippedRow = tuple[int, str, str, SuppressedAs | None]


@dataclass
class Progress:
    recipients: int
    created: int
    by_state: dict[str, int]
    deliveries: dict[str, int]
    skipped: dict[str, int]
    # The skipped (or, before the fan-out, about-to-be-skipped) addresses, the first few: (row
    # of the upload, address, skip reason, the suppression entry that covers it now or None).
    skipped_rows: list[SkippedRow] = field(default_factory=list)

    @property
    def accepted(self) -> int:
        return self.by_state.get("accepted", 0)

    @property
    def skipped_count(self) -> int:
        """Every recipient filtered out, not only the ``skipped_rows`` listed."""
        return sum(self.skipped.values())

    @property
    def not_sent(self) -> int:
        """Sends that ended without going out: blocked at the pre-call check (a suppression, a
        narrower policy), failed, expired or cancelled."""
        return sum(self.by_state.get(s, 0) for s in ("blocked", "failed", "expired", "cancelled"))

    @property
    def needs_attention(self) -> int:
        """Sends whose outcome only a person can settle."""
        return self.by_state.get("needs_attention", 0)

    @property
    def unsent(self) -> int:
        """Sends on their way (or held by a pause): queued, sending, or awaiting the answer of a
        call that may have gone out. With ``accepted``, ``not_sent`` and ``needs_attention``
        it makes ``created``: every state of a send is in exactly one of the four."""
        return sum(self.by_state.get(s, 0) for s in ("queued", "sending", "uncertain"))


@dataclass(frozen=True)
class Pace:
    """How fast a broadcast goes out: ``per_second`` as the worker paces it (its author's
    ``rate_per_second`` or the default, within the mailbox key's share), whether its author
    chose it, and ``seconds``, the least time its whole list takes at that pace (replies from
    the mailbox and the key's own budget can only make it longer)."""

    per_second: float
    chosen: bool
    seconds: float

    @property
    def per_second_shown(self) -> str:
        """The pace as written (``0.001``, ``2``, ``2.5``: no zeros padded), in the active
        language's number format."""
        return number_format(Decimal(f"{self.per_second:g}"))


def broadcast_pace(broadcast: Broadcast) -> Pace:
    per_second = broadcast_rate(broadcast.rate_per_second)
    return Pace(
        per_second=per_second,
        chosen=broadcast.rate_per_second is not None,
        seconds=broadcast.recipient_count / per_second,
    )


def broadcast_progress(broadcast: Broadcast) -> Progress:
    """Counts for the page and the API: sends by state, deliveries by state (webhooks), and
    the recipients filtered out (recorded at fan-out; before it, what the fan-out would filter
    now: suppressed or outside the mailbox's policy)."""
    by_state = dict(
        SendIntent.objects.filter(broadcast=broadcast)
        .values_list("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    deliveries = dict(
        SendIntent.objects.filter(broadcast=broadcast, deliveries__isnull=False)
        .values_list("deliveries__state")
        .annotate(n=Count("id"))
        .values_list("deliveries__state", "n")
    )
    recipients = BroadcastRecipient.objects.filter(broadcast=broadcast)
    if broadcast.state in (Broadcast.State.PENDING_REVIEW, Broadcast.State.APPROVED):
        skipped_rows = _would_skip(broadcast)
    else:
        skipped_rows = _entries_named(
            broadcast,
            list(
                recipients.exclude(skip_reason="")
                .order_by("position")
                .values_list("source_row", "address", "skip_reason")
            ),
        )
    skipped: dict[str, int] = {}
    for _, _, reason, _ in skipped_rows:
        skipped[reason] = skipped.get(reason, 0) + 1
    return Progress(
        recipients=broadcast.recipient_count,
        created=sum(by_state.values()),
        by_state=by_state,
        deliveries=deliveries,
        skipped=skipped,
        skipped_rows=skipped_rows[:SKIPPED_SHOWN],
    )


def _would_skip(broadcast: Broadcast) -> list[SkippedRow]:
    # The rows of the hash the page carries, as the sample's (``broadcast_sample``).
    rows = list(
        BroadcastRecipient.objects.filter(
            broadcast=broadcast, broadcast__content_hash=broadcast.content_hash
        )
        .order_by("position")
        .values_list("source_row", "address")
    )
    # The rows hold the stored form (as the fan-out's check reads them, normalised again).
    suppressed = tenant_suppressed(broadcast.tenant_id, [address for _, address in rows])
    out: list[SkippedRow] = []
    mailbox = broadcast.mailbox
    for row, address in rows:
        if address in suppressed:
            entry = suppressed[address]
            out.append((row, address, BroadcastRecipient.Skip.SUPPRESSED.value, entry))
        elif not mailbox.allows_recipient(address):
            out.append((row, address, BroadcastRecipient.Skip.NOT_ALLOWED.value, None))
    return out


def _entries_named(broadcast: Broadcast, rows: list[tuple[int, str, str]]) -> list[SkippedRow]:
    """The fanned-out broadcast's skipped rows, those suppressed with the entry that covers them
    now (one query, for the rows listed): ana+billing@ skipped "as ana@example.com"."""
    shown = rows[:SKIPPED_SHOWN]
    suppressed = tenant_suppressed(
        broadcast.tenant_id,
        [a for _, a, reason in shown if reason == BroadcastRecipient.Skip.SUPPRESSED],
    )
    return [(row, address, reason, suppressed.get(address)) for row, address, reason in rows]


@dataclass
class NotAscii:
    count: int
    # The first few: (row of the upload, address, its letters beyond ASCII named).
    rows: list[tuple[int, str, str]]


def broadcast_addresses_not_ascii(broadcast: Broadcast) -> NotAscii:
    """The recipients whose address holds letters beyond ASCII, each named
    (``letters_beyond_ascii``): "b\u0456lling@example.com", with a Cyrillic small i, reads as
    "billing@example.com" in a list, and a broadcast is approved from one (the sample, the
    download). A draft's page names such letters beside the address. Of the rows of the hash
    the page carries, as the sample's (``broadcast_sample``)."""
    rows = BroadcastRecipient.objects.filter(
        broadcast=broadcast,
        broadcast__content_hash=broadcast.content_hash,
        address__regex=r"[^\x01-\x7f]",
    ).order_by("position")
    shown = [
        (row, address, letters_beyond_ascii(address))
        for row, address in rows.values_list("source_row", "address")[:SKIPPED_SHOWN]
    ]
    count = len(shown) if len(shown) < SKIPPED_SHOWN else rows.count()
    return NotAscii(count=count, rows=shown)


@dataclass
class ValuesNamed:
    """Recipients whose values bring something the page names (characters nobody sees, a
    look-alike domain, a link leading elsewhere): how many, and the first few."""

    count: int
    # The first few: (row of the upload, address, what each value brings, by its name).
    rows: list[tuple[int, str, str]]


def broadcast_values_invisible(broadcast: Broadcast) -> ValuesNamed:
    """The recipients one of whose values holds a character nobody sees
    (``common.text.INVISIBLE_CHARACTERS``, the draft check's set), counted in the query, the
    first few named: the page names the sample's characters (``review.pages.invisible_named``),
    and a row of the upload further down with "Ana\u202emoc.evil" in a name went out unnamed to
    its recipient. Named, not refused, as a draft's are on its page (a broadcast is approved
    on no other). Of the rows of the hash the page carries, as the sample's."""
    table = BroadcastRecipient._meta.db_table
    # The table's own name, the pattern a parameter: nothing of a request in the text.
    holds = RawSQL(  # noqa: S611
        f'EXISTS (SELECT 1 FROM jsonb_each_text("{table}"."variables") AS v(name, value) '  # noqa: S608
        "WHERE v.value ~ %s)",
        (INVISIBLE_CHARACTERS.pattern,),
        output_field=BooleanField(),
    )
    rows = BroadcastRecipient.objects.filter(
        holds, broadcast=broadcast, broadcast__content_hash=broadcast.content_hash
    ).order_by("position")
    shown = [
        (
            row,
            address,
            "; ".join(
                f"{name}: {named}"
                for name, value in sorted(variables.items())
                if (named := invisible_characters(str(value)))
            ),
        )
        for row, address, variables in rows.values_list("source_row", "address", "variables")[
            :SKIPPED_SHOWN
        ]
    ]
    count = len(shown) if len(shown) < SKIPPED_SHOWN else rows.count()
    return ValuesNamed(count=count, rows=shown)


# A value that may name a look-alike domain holds a letter beyond ASCII or a Punycode label
# ("xn--"): a value of plain ASCII without one names none (``intents.hostnames.lookalike_host``).
_MAY_NAME_LOOKALIKE = "[^\x01-\x7f]|xn--"


def broadcast_values_lookalike_hosts(broadcast: Broadcast) -> ValuesNamed:
    """The recipients one of whose values (of a variable the template uses) is or holds a domain
    name that may read as another (``intents.hostnames.lookalike_host``: "b\u0430nk.example"
    with a Cyrillic a), counted over every row, the first few named with the name and the one a
    browser opens. The page names the sample's (``review.pages.lookalike_hosts_named``); a row
    further down went out unnamed to its recipient. Which rows may hold one is read in the query;
    whether they do, by the same definition as the draft's. Named, not refused."""
    used = sorted(broadcast_variable_names(broadcast))
    if not used:
        return ValuesNamed(count=0, rows=[])
    table = BroadcastRecipient._meta.db_table
    # The table's own name, the names and pattern parameters: nothing of a request in the text.
    may_hold = RawSQL(  # noqa: S611
        f'EXISTS (SELECT 1 FROM jsonb_each_text("{table}"."variables") AS v(name, value) '  # noqa: S608
        "WHERE v.name = ANY(%s) AND v.value ~* %s)",
        (used, _MAY_NAME_LOOKALIKE),
        output_field=BooleanField(),
    )
    candidates = (
        BroadcastRecipient.objects.filter(
            may_hold, broadcast=broadcast, broadcast__content_hash=broadcast.content_hash
        )
        .order_by("position")
        .values_list("source_row", "address", "variables")
        .iterator(chunk_size=1000)
    )
    count = 0
    shown: list[tuple[int, str, str]] = []
    for row, address, variables in candidates:
        found = [
            (name, hosts)
            for name in used
            if (hosts := lookalike_hosts(str(variables.get(name, ""))))
        ]
        if not found:
            continue
        count += 1
        if len(shown) < SKIPPED_SHOWN:
            named = "; ".join(
                f"{name}: " + ", ".join(_host_named(host) for host in hosts)
                for name, hosts in found
            )
            shown.append((row, address, named))
    return ValuesNamed(count=count, rows=shown)


def broadcast_values_misleading_links(broadcast: Broadcast) -> ValuesNamed:
    """The recipients whose values make a link of the HTML lead elsewhere than it shows (a link
    that shows "https://bank.example/pay" and whose ``href="{{ url }}"`` is "https://evil.test"
    in their row), counted over every row, the first few named with where it leads. The page
    names the sample's links (``review.pages.links_named``); a row further down went out
    unnamed to its recipient. Only the links a placeholder sits in are read, with only the
    values they use. Named, not refused."""
    based, links = template_links(broadcast.html, broadcast_content.PLACEHOLDER)
    if not links:
        return ValuesNamed(count=0, rows=[])
    names = sorted(
        {
            name
            for text, target in links
            for name in broadcast_content.PLACEHOLDER.findall(text + target)
        }
    )
    rows = (
        BroadcastRecipient.objects.filter(
            broadcast=broadcast, broadcast__content_hash=broadcast.content_hash
        )
        .order_by("position")
        # One key each, taken whole: KT("variables__u__rl") is the path variables -> u -> rl, so
        # a placeholder named with "__" read nothing in any row (the real address unnamed).
        .values_list(
            "source_row", "address", *(KeyTextTransform(name, "variables") for name in names)
        )
        .iterator(chunk_size=1000)
    )
    count = 0
    shown: list[tuple[int, str, str]] = []
    for row, address, *values in rows:
        variables = {name: value or "" for name, value in zip(names, values, strict=True)}
        led = [
            (filled_text, filled_target)
            for text, target in links
            if filled_link_misleading(
                filled_text := broadcast_content.render(text, variables),
                filled_target := broadcast_content.render(target, variables),
                based=based,
            )
        ]
        if not led:
            continue
        count += 1
        if len(shown) < SKIPPED_SHOWN:
            named = "; ".join(f"{text or '-'} → {target}" for text, target in led)
            shown.append((row, address, named))
    return ValuesNamed(count=count, rows=shown)


def _host_named(host: str) -> str:
    """A look-alike name as the draft's page names it: as written, the name a browser opens
    (or that it opens none), its letters beyond ASCII."""
    named = lookalike_named(host)
    other = named.other_form or "?"
    return f"{named.name} = {other}" + (f" ({named.letters})" if named.letters else "")


def broadcast_sample(broadcast: Broadcast, position: int = 0) -> dict | None:
    """The message one recipient (by canonical position) receives, rendered as it will be sent;
    None when there is none, or when retention emptied the values it was made of.

    Only a row of ``broadcast.content_hash`` (the hash the page's approve button carries),
    checked in the same statement: recipients replaced after the broadcast was read give None,
    never the other list's message shown above this hash's approve button."""
    if broadcast.body_purged_at is not None:
        return None
    recipient = BroadcastRecipient.objects.filter(
        broadcast=broadcast, broadcast__content_hash=broadcast.content_hash, position=position
    ).first()
    if recipient is None:
        return None
    subject, text, html = broadcast_content.rendered_message(
        subject=broadcast.subject,
        text=broadcast.text,
        html=broadcast.html,
        variables=recipient.variables,
    )
    return {
        "address": recipient.address,
        "row": recipient.source_row,
        "subject": subject,
        "text": text,
        "html": html,
    }


def broadcast_recipient_rows(broadcast: Broadcast, *, content_hash: str):
    """Every recipient of the broadcast in canonical order: (row of the upload, address, the
    variables), streamed in chunks (10,000 rows). The whole list a person approves, for the
    page's download: one sample does not show what the 9,999 others receive.

    Only while the broadcast's hash is ``content_hash``, checked in the same statement (one
    snapshot): a replacement of the recipients committed after the caller read the hash gives
    no rows, never the other list under this hash."""
    return (
        BroadcastRecipient.objects.filter(broadcast=broadcast, broadcast__content_hash=content_hash)
        .order_by("position")
        .values_list("source_row", "address", "variables")
        .iterator(chunk_size=1000)
    )


def broadcast_variable_names(broadcast: Broadcast) -> set[str]:
    """The variable names the broadcast's template uses."""
    return (
        broadcast_content.placeholders("subject", broadcast.subject)
        | broadcast_content.placeholders("text", broadcast.text)
        | broadcast_content.placeholders("html", broadcast.html)
    )
