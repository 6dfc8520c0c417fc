"""Who may approve for which mailbox, and which recipients a mailbox may write to.

Used at approval time and again by the worker right before the provider call, so a right revoked
or an address suppressed in between stops the send. The recipient rule has one home here: its
Python form (``recipient_problems``) and the SQL form a query derives from it to flag many rows at
once (``recipient_breaks_policy_sql``), side by side so that they change together.
"""

from __future__ import annotations

import html as html_lib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models import Exists, OuterRef, Q
from django.utils.text import get_text_list
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop, ngettext

# The address form every entry stores and every check compares lives below every app
# (common.addresses), where the mailbox's allow-list service reaches it too; the apps above
# import it from here, beside the recipient rule.
from common.addresses import MAX_ADDRESS_LENGTH as MAX_ADDRESS_LENGTH
from common.addresses import (
    SUB_ADDRESS_SEPARATOR,
    letters_beyond_ascii,
    routes_onward,
    suppression_keys,
)
from common.addresses import normalize_address as normalize_address
from common.text import invisible_characters
from intents.hostnames import lookalike_hosts, unicode_form
from intents.html_links import html_links
from intents.html_styles import html_words
from intents.models import DraftVersion, Suppression
from mailboxes.models import Mailbox
from tenants.models import Membership, Tenant

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

DECIDING_ROLES = Membership.DECIDING_ROLES


# A recipient problem's code as the API, the journal and the pre-call check name it.
ERROR_CODES = {
    "invalid": "recipient_invalid",
    "own_mailbox": "recipient_own_mailbox",
    "not_allowed": "recipient_not_allowed",
    "suppressed": "recipient_suppressed",
}


# A recipient problem's message: the API's and the approval page's refusal in the reader's
# language, and the pre-call check's reason (and last error), which the worker writes in English
# and intents.reason_words reads in the reader's words (these msgids).
SUPPRESSED = gettext_noop(
    "%(address)s is on this tenant's suppression list (bounced, complained or rejected before)"
)
# A sub-address covered by its base address's entry (common.addresses.suppression_keys), naming
# that entry and its reason (Suppression.Reason's label, lower-cased), which the list shows.
SUPPRESSED_AS = gettext_noop(
    "%(address)s is on this tenant's suppression list as %(entry)s (%(reason)s): a "
    "sub-address reaches the same mailbox"
)
OWN_MAILBOX = gettext_noop(
    "%(address)s is the sending mailbox's own address: the message would come back into "
    "its own inbox, where the agent may answer it again. Leave it out; what is sent is kept "
    "in the mailbox anyway."
)
OUTSIDE_ROUTED = gettext_noop(
    "%(address)s is outside the recipient policy of %(mailbox)s: the part before the @ "
    "names another destination (with %% or !), which a mail server of that domain may "
    "pass on. An admin may allow this exact address."
)
OUTSIDE = gettext_noop("%(address)s is outside the recipient policy of %(mailbox)s")


@dataclass(frozen=True)
class RecipientProblem:
    address: str
    code: str  # a key of ERROR_CODES
    message: str

    @property
    def error_code(self) -> str:
        return ERROR_CODES[self.code]


@dataclass(frozen=True)
class SuppressedAs:
    """The suppression entry that covers a recipient: its address (the recipient's own, or the
    base address of the recipient's sub-address, ``suppression_keys``) and its reason code."""

    address: str
    reason: str

    @property
    def reason_label(self) -> StrOrPromise:
        """The reason as the list names it (``Suppression.Reason``), in the active language."""
        return dict(Suppression.Reason.choices).get(self.reason, self.reason)

    def message(self, address: str) -> str:
        """Why ``address`` is refused, in the active language: the approval's and the API's
        refusal, the pre-call check's reason."""
        if self.address == address:
            return _(SUPPRESSED) % {"address": address}
        return _(SUPPRESSED_AS) % {
            "address": address,
            "entry": self.address,
            "reason": str(self.reason_label).lower(),
        }


def suppressed_addresses(
    pairs: Iterable[tuple[int, str]],
) -> dict[tuple[int, str], SuppressedAs]:
    """The (tenant id, normalised address) pairs that an entry of their tenant's suppression
    list covers (``suppression_keys``: the address, or the base address of a sub-address),
    each with that entry, its own before its base address's; in one query, whatever the number
    of pairs (the worker checks a whole claimed batch at once)."""
    keyed = {pair: suppression_keys(pair[1]) for pair in set(pairs)}
    if not keyed:
        return {}
    rows = Suppression.objects.filter(
        tenant_id__in={t for t, _ in keyed},
        address__in={key for keys in keyed.values() for key in keys},
    ).values_list("tenant_id", "address", "reason")
    entries = {(t, a): SuppressedAs(a, r) for t, a, r in rows}
    found = {}
    for (tenant_id, address), keys in keyed.items():
        for key in keys:
            if (tenant_id, key) in entries:
                found[tenant_id, address] = entries[tenant_id, key]
                break
    return found


def tenant_suppressed(tenant_id: int, addresses: Iterable[str]) -> dict[str, SuppressedAs]:
    """``suppressed_addresses`` for one tenant: the entry covering each of these (normalised)
    addresses that one covers, by address."""
    return {a: s for (_, a), s in suppressed_addresses((tenant_id, a) for a in addresses).items()}


def recipient_problems(
    *,
    tenant: Tenant,
    mailbox: Mailbox,
    addresses: Iterable[str],
    suppressed: Mapping[str, SuppressedAs] | None = None,
) -> list[RecipientProblem]:
    """Every problem with these addresses, in input order (empty list when all may be written to).

    ``suppressed``: the entries covering these addresses, by address, when the caller has just
    read them (``tenant_suppressed``, ``suppressed_addresses``); otherwise they are read here.
    """
    problems: list[RecipientProblem] = []
    normalized: list[str] = []
    for raw in addresses:
        try:
            address = normalize_address(raw)
        except ValueError as exc:
            problems.append(RecipientProblem(str(raw), "invalid", str(exc)))
            continue
        normalized.append(address)
        if is_own_address(address, own_address(mailbox)):
            problems.append(RecipientProblem(address, "own_mailbox", own_mailbox_refusal(address)))
        elif not mailbox.allows_recipient(address):
            problems.append(RecipientProblem(address, "not_allowed", _outside(mailbox, address)))
    if normalized:
        if suppressed is None:
            suppressed = tenant_suppressed(tenant.pk, normalized)
        for address in normalized:
            entry = suppressed.get(address)
            if entry is not None:
                problems.append(RecipientProblem(address, "suppressed", entry.message(address)))
    return problems


def own_address(mailbox: Mailbox) -> str:
    """The sending mailbox's address in the normal form every recipient is compared in: no
    message of it may go to it (``own_mailbox_refusal``)."""
    try:
        return normalize_address(mailbox.address)
    except ValueError:
        return mailbox.address.lower()


# An inbox's username cannot hold the sub-address separator (common.addresses.
# SUB_ADDRESS_SEPARATOR; ``mailboxes.provisioning.USERNAME_RE``), so "support+x@" is no inbox's.
def is_own_address(address: str, own: str) -> bool:
    """Whether ``address`` (normal form) names the sending inbox ``own`` (``own_address``): the
    address itself or a sub-address of it ("support+x@" for "support@"). AgentMail documents no
    sub-address routing, but a server that honours it delivers such a message into the inbox (a
    mail loop), and one that does not bounces it: either way no reply needs it, and no other
    mailbox of ours can have that address."""
    if address == own:
        return True
    local, _at, domain = address.rpartition("@")
    own_local, _at, own_domain = own.rpartition("@")
    return domain == own_domain and local.startswith(own_local + SUB_ADDRESS_SEPARATOR)


def own_mailbox_refusal(address: str) -> str:
    # No allow-list entry lifts it: no reply needs it (the sent message is kept in the
    # inbox's thread), and AgentMail delivers it into the inbox as a new message, which may
    # start the agent again (a mail loop).
    return _(OWN_MAILBOX) % {"address": address}


def _outside(mailbox: Mailbox, address: str) -> str:
    if routes_onward(address) and mailbox.allows_domain_of(address):
        return _(OUTSIDE_ROUTED) % {"address": address, "mailbox": mailbox.address}
    return _(OUTSIDE) % {
        "address": address,
        "mailbox": mailbox.address,
    }


# common.addresses.ROUTING_CHARACTERS as a regular expression's class, "%" written as \x25 (the
# query's text is run with parameters, where a bare "%" would be taken for one).
_ROUTING_CLASS = r"[!\x25]"


def recipient_breaks_policy_sql(*, address: str, tenant_id: str, mailbox_id: str) -> str:
    """The SQL form of the rule ``recipient_problems`` applies to a valid address: true when an
    entry of the tenant's suppression list covers it (its own or, for a sub-address, its base
    address's: ``suppression_keys``), or is the mailbox's own address or a sub-address of it
    (``is_own_address``), or when the mailbox is
    restricted and neither the address
    nor its domain (after the last "@") is allowed, or only its domain is and its local part
    routes onward, compared lower-cased as ``Mailbox.allows_recipient`` does. The arguments are
    SQL expressions of the outer query (a column or an unnested value); table and column names
    come from the models. Constant SQL: it interpolates no input."""
    suppression, mailbox = Suppression._meta, Mailbox._meta

    def column(meta, name: str) -> str:
        return f'"{meta.get_field(name).column}"'

    addr = f"lower({address})"
    # suppression_keys' base address: the local part cut at its first "+" when something comes
    # before it; an address that is no sub-address is left as it is.
    base = rf"regexp_replace({addr}, '^([^+@]+)[+][^@]*(@[^@]*)$', '\1\2')"
    # Names from the models and expressions from our own callers, no input.
    return f"""(
      EXISTS (
        SELECT 1 FROM "{suppression.db_table}" s
        WHERE s.{column(suppression, "tenant")} = {tenant_id}
          AND s.{column(suppression, "address")} IN ({addr}, {base})
      )
      OR EXISTS (
        SELECT 1 FROM "{mailbox.db_table}" m
        WHERE m.{column(mailbox, "id")} = {mailbox_id}
          AND (
            lower(m.{column(mailbox, "address")}) = {addr}
            OR (
              substring({addr} from '[^@]*$')
                = substring(lower(m.{column(mailbox, "address")}) from '[^@]*$')
              AND starts_with(
                substring({addr} from '^(.*)@[^@]*$'),
                substring(lower(m.{column(mailbox, "address")}) from '^(.*)@[^@]*$')
                  || '{SUB_ADDRESS_SEPARATOR}'
              )
            )
          )
      )
      OR EXISTS (
        SELECT 1 FROM "{mailbox.db_table}" m
        WHERE m.{column(mailbox, "id")} = {mailbox_id}
          AND m.{column(mailbox, "policy_mode")} <> '{Mailbox.PolicyMode.OPEN.value}'
          AND NOT EXISTS (
            SELECT 1 FROM unnest(m.{column(mailbox, "allowed_addresses")}) AS a(allowed)
            WHERE lower(a.allowed) = {addr}
          )
          AND (
            NOT EXISTS (
              SELECT 1 FROM unnest(m.{column(mailbox, "allowed_domains")}) AS d(allowed)
              WHERE lower(d.allowed) = substring({addr} from '[^@]*$')
            )
            OR substring({addr} from '^(.*)@[^@]*$') ~ '{_ROUTING_CLASS}'
          )
      )
    )"""  # noqa: S608


def lookalike_recipients(addresses: Iterable[str]) -> dict[str, str]:
    """The addresses among these that only the draft's page may approve, each with its letters
    outside ASCII named (``letters_beyond_ascii``, the draft page's note). A list shows an
    address as it is: ``b\u0456lling@example.com``, with a Cyrillic small i, reads as
    ``billing@example.com``. The queue marks such a row and its bulk approval leaves it out."""
    return {address: beyond for address in addresses if (beyond := letters_beyond_ascii(address))}


def invisible_in_content(*, subject: str, text: str, html: str) -> dict[str, str]:
    """The characters nobody sees (``common.text.invisible_characters``) in a version's subject,
    text and HTML (its character references undone), named, by field; only the fields that hold
    some. The draft page names them, with the subject as it holds them; a list shows the text
    as drawn, so its bulk approval leaves such a draft to the page."""
    found = {
        "subject": invisible_characters(subject),
        "text": invisible_characters(text),
        "html": invisible_characters(html_lib.unescape(html)) if html else "",
    }
    return {field: named for field, named in found.items() if named}


@dataclass(frozen=True)
class LookalikeHost:
    name: str  # as the message writes it
    other_form: str  # its Punycode when written in letters, its letters when in Punycode
    letters: str  # its letters outside ASCII, named (letters_beyond_ascii)


def lookalike_named(name: str) -> LookalikeHost:
    shown = unicode_form(name) or ""
    if name.isascii():
        return LookalikeHost(name, shown, letters_beyond_ascii(shown))
    try:
        ace = name.encode("idna").decode("ascii")
    except UnicodeError:
        ace = ""
    return LookalikeHost(name, ace, letters_beyond_ascii(name))


def lookalike_hosts_in_content(*, subject: str, text: str, html: str) -> dict[str, list]:
    """The domain names in a version's subject, text and HTML that may read as another
    (``intents.hostnames.lookalike_host``), by field; only the fields that hold some. A mail
    client makes a link of "https://b\u0430nk.example/pay" written in text, and the reader
    sees bank.example: the HTML's words (its link texts among them) and its links' targets are
    read, as are the text and the subject. The draft page names each, with its other form and
    its letters; a list shows it as drawn, so its bulk approval leaves such a draft to the
    page."""
    html_read = ""
    if html:
        html_read = "\n".join([html_words(html), *(link.target for link in html_links(html))])
    found = {
        "subject": lookalike_hosts(subject),
        "text": lookalike_hosts(text),
        "html": lookalike_hosts(html_read),
    }
    return {
        field: [lookalike_named(name) for name in names] for field, names in found.items() if names
    }


def on_thread(address: str, senders: Iterable[str]) -> bool:
    """Whether a customer message came from ``address``: its sender (``senders``, lower-cased) is
    the address or ends with it in angle brackets ("Jane <jane@x.test>"); the queue's flag is the
    same comparison in SQL (``review.queries._has_warning_sql``). Not parseaddr: it reads a sender
    it finds ambiguous ("Doe, John <john@x.test>", or one a customer shaped for it) as nobody, and
    a thread of such senders hid the warning for every recipient. Not LIKE: "_" and "%" may be in
    an address, and matched other addresses."""
    address = address.lower()
    return any(sender == address or sender.endswith(f"<{address}>") for sender in senders)


def strangers_to_thread(addresses: Iterable[str], senders: Iterable[str]) -> list[str]:
    """The addresses among these that wrote none of the thread's customer messages (``senders``,
    lower-cased; none: the draft has no thread to be a stranger to). The draft page says "Not a
    participant of this thread" beside each and the queue marks the row; a list shows neither
    whose conversation the reply carries nor to whom, so its bulk approval leaves it out."""
    senders = list(senders)
    if not senders:
        return []
    return [address for address in addresses if not on_thread(address, senders)]


def sender_address(sender: str) -> str:
    """The address of a customer message's sender as recorded, lower-cased: the part in its last
    angle brackets when it ends with them ("Jane <jane@x.test>"), else the whole, as ``on_thread``
    reads it."""
    sender = sender.strip().lower()
    if sender.endswith(">") and "<" in sender:
        return sender[sender.rindex("<") + 1 : -1].strip()
    return sender


def _sender_domain(sender: str) -> str:
    address = sender_address(sender)
    return address.rpartition("@")[2] if "@" in address else ""


def answered_author_left_out(addresses: Iterable[str], author: str) -> bool:
    """Whether a reply goes to none of the author of the message it answers (``author``: that
    message's sender as recorded; empty when the draft answers none). A customer can join
    another's thread (a reply of theirs whose In-Reply-To names her message lands in it, since
    threads follow the headers), so being on the thread is not enough: a reply answering Ben's
    message but addressed only to Ana carries Ben's question to her. The draft page says so
    and a list's approval leaves it out."""
    if not author:
        return False
    senders = [author.lower()]
    return not any(on_thread(address, senders) for address in addresses)


def mixed_thread_domains(senders: Iterable[str]) -> list[str]:
    """The address domains a thread's customer messages come from (``senders``), sorted, when
    they are more than one organisation; else none. A domain and its subdomains count as one
    (``mail.ana.test`` is ``ana.test``). By domain, not by address: colleagues of one company
    in copy of each other are common and no warning; a stranger who joined the thread (Ben's
    message with In-Reply-To set to Ana's lands in her thread) usually writes from another
    domain. Two strangers on one freemail domain (gmail.com) are not told apart by this rule:
    ``answered_author_left_out`` and the forwarded files' source (``files_of_others``) still
    catch the reply that goes to the wrong one of them. The draft page and the queue row say
    so; a list's approval leaves such a thread's replies out."""
    domains = {domain for sender in senders if (domain := _sender_domain(sender))}
    # Each domain's own parents are looked up, not every other domain compared: a customer can
    # put thousands of messages from as many domains into one thread, and that was their square.
    organisations = sorted(domain for domain in domains if not _parent_in(domain, domains))
    return organisations if len(organisations) > 1 else []


# How many of a thread's organisations a sentence names before it counts the rest.
NAMED_DOMAINS = 5


def domains_named(domains: list[str]) -> str:
    """``mixed_thread_domains``'s answer for a sentence: every domain when there are few, else
    the first ``NAMED_DOMAINS`` and how many more. A customer can put two thousand messages from
    as many domains into one thread, and each warning named them all: some 30 KB in one
    sentence of the draft page, in the title of each such queue row, and in the refusal of an
    approval from a list."""
    if len(domains) <= NAMED_DOMAINS:
        return get_text_list(domains, _("and"))
    more = len(domains) - NAMED_DOMAINS
    return ngettext("%(domains)s and %(n)s more", "%(domains)s and %(n)s more", more) % {
        "domains": ", ".join(domains[:NAMED_DOMAINS]),
        "n": more,
    }


def _parent_in(domain: str, domains: set[str]) -> bool:
    """Whether a domain that ``domain`` is a subdomain of (``mail.ana.test`` of ``ana.test``) is
    among ``domains``."""
    labels = domain.split(".")
    return any(".".join(labels[i:]) in domains for i in range(1, len(labels)))


def files_of_others(
    files: Iterable[tuple[str, str]], addresses: Iterable[str]
) -> list[tuple[str, str]]:
    """The forwarded files whose source message's author is not among a reply's recipients, as
    (file name, that author's address). ``files``: (file name, source sender as recorded) of
    each of the version's files; an uploaded file (no source) is never among them. Ana's
    passport forwarded in a reply to Ben is the case: the draft page names the file's source
    beside it and a list's approval leaves the reply out."""
    addresses = list(addresses)
    return [
        (name, sender_address(source))
        for name, source in files
        if source and not any(on_thread(address, [source.lower()]) for address in addresses)
    ]


def can_approve(*, membership, mailbox) -> bool:
    """An active member (and active user) of the mailbox's tenant, with a deciding role and the
    right for this mailbox. Reads the rows as given: callers pass a freshly loaded membership."""
    if membership is None or not membership.is_active or not membership.user.is_active:
        return False
    if membership.tenant_id != mailbox.tenant_id:
        return False
    if membership.role not in DECIDING_ROLES:
        return False
    if membership.approve_all_mailboxes:
        return True
    return membership.approve_mailboxes.filter(pk=mailbox.pk).exists()


def may_decide_exists(*, tenant: str, user: str, mailbox: str) -> Exists:
    """``can_approve``'s rule as an EXISTS on the outer query's columns (``tenant``, ``user`` and
    ``mailbox`` name them), to ask it of many rows at once."""
    return Exists(
        Membership.objects.filter(
            tenant_id=OuterRef(tenant),
            user_id=OuterRef(user),
            is_active=True,
            user__is_active=True,
            role__in=list(DECIDING_ROLES),
        ).filter(Q(approve_all_mailboxes=True) | Q(approve_mailboxes=OuterRef(mailbox)))
    )


def approvable_mailbox_ids(membership) -> set[int] | None:
    """The rights part of ``can_approve`` for a page of rows at once, in at most one query: None
    means every mailbox; otherwise the ids this member may decide for. The caller's membership is
    the request's, already active."""
    if membership.role not in DECIDING_ROLES:
        return set()
    if membership.approve_all_mailboxes:
        return None
    return set(membership.approve_mailboxes.values_list("pk", flat=True))


def may_decide(allowed: set[int] | None, mailbox_id: int) -> bool:
    return allowed is None or mailbox_id in allowed


SECOND_APPROVER_REASON = gettext_lazy(
    "You edited this version; this tenant requires another person to approve it."
)
# A colleague's later version (a full stop added, the agent re-posting the same text) does not
# make an edit of the person's someone else's: they still saw only their own.
EARLIER_VERSION_REASON = gettext_lazy(
    "You wrote a version of this draft since it was last approved; this tenant requires "
    "another person to approve it."
)


# The draft page says it before the click; draft_approve refuses with the same words.
ANSWERED_MESSAGE_GONE_REASON = gettext_lazy(
    "The message this reply answers was in the inbox that was deleted at AgentMail and made "
    "again: AgentMail no longer has it, so the reply cannot go out in its thread (its send "
    "would fail). Reject it and write the answer as a new message."
)


def answered_message_gone(mailbox: Mailbox, answered) -> bool:
    """Whether the customer's message a reply answers (an ``InboundMessage``) was in an inbox
    of ``mailbox`` that AgentMail deleted: recorded, or received by AgentMail, before the
    mailbox forgot that inbox (``Mailbox.inbox_lost_at``, mailboxes.recovery). The new inbox, at
    the same address (the inbox id), starts empty, and AgentMail's reply route answers 404 for
    a message it does not hold. Received before: a late webhook of the deleted inbox (Svix
    retries for days) names the same inbox id as the new one and is recorded after the loss;
    the new inbox is made after the mailbox forgot the old one, so nothing it received is older."""
    lost_at = mailbox.inbox_lost_at
    return (
        answered is not None
        and lost_at is not None
        and (answered.recorded_at < lost_at or answered.received_at < lost_at)
    )


def needs_another_approver(*, tenant, author_kind, author_user_id, user) -> bool:
    """Four-eyes on edit: with the tenant's policy on, the person who wrote the current version
    may not approve it. Takes the version's author fields so the queue can ask for every row
    without loading the versions; draft_approve and the pages ask this same function."""
    return user is not None and approved_by_its_author(
        tenant=tenant, author_kind=author_kind, author_user_id=author_user_id, approver_id=user.pk
    )


# The broadcast page says it before the click; broadcast_approve refuses it with its own message.
BROADCAST_AUTHOR_REASON = gettext_lazy(
    "You posted this broadcast; this tenant requires another person to approve it."
)


def broadcast_needs_another_approver(*, tenant, broadcast, user) -> bool:
    """Four-eyes for a broadcast: the person who posted it is its author (an agent's has none).
    broadcast_approve and the broadcast page ask this same function."""
    return needs_another_approver(
        tenant=tenant,
        author_kind=(
            DraftVersion.Author.PERSON if broadcast.created_by_id else DraftVersion.Author.AGENT
        ),
        author_user_id=broadcast.created_by_id,
        user=user,
    )


def approved_by_its_author(*, tenant, author_kind, author_user_id, approver_id) -> bool:
    """``needs_another_approver`` by user id: the worker's pre-call check asks it of a send's
    approver (``intents.sending.precheck``), whose user row it does not load."""
    return bool(
        tenant.second_approver_on_edit
        and author_kind == DraftVersion.Author.PERSON
        and approver_id is not None
        and author_user_id == approver_id
    )


# Who may write an internal note on a draft: the people who review (admins and approvers, whatever
# their per-mailbox rights: a colleague without the right may still know the customer). Viewers
# read only, as everywhere else.
NOTE_WRITERS = frozenset({Membership.Role.ADMIN, Membership.Role.APPROVER})


def active_membership(*, tenant, user):
    """The user's active membership in this tenant, loaded now, or None."""
    if user is None:
        return None
    return (
        Membership.objects.select_related("user")
        .filter(tenant=tenant, user=user, is_active=True, user__is_active=True)
        .first()
    )


def active_memberships(pairs: Iterable[tuple[int, int]]) -> dict[tuple[int, int], Membership]:
    """Active memberships keyed by (tenant id, user id), loaded now, in one query."""
    pairs = set(pairs)
    if not pairs:
        return {}
    rows = Membership.objects.select_related("user").filter(
        tenant_id__in={t for t, _ in pairs},
        user_id__in={u for _, u in pairs},
        is_active=True,
        user__is_active=True,
    )
    return {(m.tenant_id, m.user_id): m for m in rows if (m.tenant_id, m.user_id) in pairs}


def user_may_decide(*, tenant, user, mailbox) -> bool:
    """``can_approve`` for a user (their active membership of ``tenant``, loaded now)."""
    return can_approve(membership=active_membership(tenant=tenant, user=user), mailbox=mailbox)


def approver_memberships(*, mailbox, role: str = "", present_only: bool = False) -> list:
    """The memberships that may decide for this mailbox now (``can_approve``'s rule for all the
    tenant's members in one query), by user id: the order the round-robins walk. ``role`` narrows
    to one deciding role; ``present_only`` skips the members marked away."""
    qs = (
        Membership.objects.select_related("user")
        .filter(
            tenant_id=mailbox.tenant_id,
            is_active=True,
            user__is_active=True,
            role__in=[role] if role else list(DECIDING_ROLES),
        )
        .filter(Q(approve_all_mailboxes=True) | Q(approve_mailboxes=mailbox))
        .distinct()
        .order_by("user_id")
    )
    if present_only:
        qs = qs.filter(is_away=False)
    return list(qs)


def next_in_turn(candidates: list, last_user_id: int | None):
    """Round-robin: the first candidate after the last one picked (by user id), wrapping."""
    if not candidates:
        return None
    if last_user_id is not None:
        for membership in candidates:
            if membership.user_id > last_user_id:
                return membership
    return candidates[0]
