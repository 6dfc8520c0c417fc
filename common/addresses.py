"""The one form of an email address and of a domain that every entry stores and every check
compares: draft recipients (agent API, MCP, the reviewer's edit), broadcast rows, suppressions,
a mailbox's allow-lists. Below every app, so that the mailbox's own policy service
(``mailboxes.provisioning``) and the domain apps use the same function.

The domain is kept in its ASCII form (IDNA A-label, ``xn--...``), not in Unicode. On screen a
Unicode domain can look exactly like another one (example.com written with a Cyrillic small a,
U+0430, is ``xn--exmple-4nf.com``), and every page that lists recipients (the queue a reviewer
approves from in bulk, the outbox, the journal) showed it as the plain name. The allow-lists and
the organisation's own domains are typed in ASCII, so a Unicode domain never matched an IDN
written there. The whole address is lower-cased, its local part too: RFC 5321 (2.4) lets the
receiving server tell "Ana@" from "ana@", but a person reads them as one address, and the
suppression list, the allow-lists and the content hash compare them as one; so "Ana@example.com"
and "ana@example.com" are one recipient everywhere. The local part has no ASCII form: it stays
Unicode (NFC), and the draft page names every character of it outside ASCII
(``letters_beyond_ascii``); the queue's bulk approval, whose rows cannot, leaves such a draft to
its page.

No DNS or deliverability lookups: they are slow, flaky and leak which addresses we write to.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email as django_validate_email
from django.utils.translation import get_language, gettext_lazy
from django.utils.translation import gettext as _
from email_validator import EmailNotValidError, validate_email

MAX_ADDRESS_LENGTH = 254
# Characters by which a local part names another destination to a mail server that still honours
# the old source-routing conventions: "user%elsewhere.org@partner.org" (the percent hack, which
# Postfix, for one, applies by default to its own domains) and "elsewhere.org!user@partner.org"
# (UUCP bang paths). Valid in an address, rare in a real one.
ROUTING_CHARACTERS = frozenset("%!")


def routes_onward(address: str) -> bool:
    """Whether the local part of ``address`` names another destination (``ROUTING_CHARACTERS``):
    allowed by its domain alone, it could still go elsewhere."""
    return not ROUTING_CHARACTERS.isdisjoint(address.rpartition("@")[0])


# RFC 5233's sub-address separator: "ana+billing@" is "ana@" to a server that honours it, as
# Gmail, Outlook, Fastmail and Proton do.
SUB_ADDRESS_SEPARATOR = "+"


def suppression_keys(address: str) -> tuple[str, ...]:
    """The suppression entries that cover ``address`` (in its stored form, ``normalize_address``):
    its own, then, for a sub-address ("ana+billing@example.com"), its base address's
    ("ana@example.com"), cut at the first "+". Those providers deliver every sub-address into
    the base address's mailbox, so the person who complained as ana@ or whose mailbox bounced
    gets ana+anything@ too. Not the other way round: an entry for "ana+news@" covers neither
    "ana@" nor "ana+other@", which may be read elsewhere (a filter, a forward). Every check of
    a recipient against the list asks this, and ``intents.policy.recipient_breaks_policy_sql``
    is its SQL form; the domain needs no step of its own, the stored form holds it in ASCII."""
    local, at, domain = address.rpartition("@")
    base, separator, _tag = local.partition(SUB_ADDRESS_SEPARATOR)
    if not at or not separator or not base:
        return (address,)
    return (address, f"{base}@{domain}")


# A syntactically valid local part, to check a domain with the address rules (no separate
# IDNA code path that could disagree with them).
_PROBE_LOCAL_PART = "x"


def normalize_address(address: str) -> str:
    """The lower-cased, syntax-checked address with its domain in ASCII (A-label); raises
    ValueError with a readable message, in the active language (``refusal_reason``)."""
    if not isinstance(address, str):
        raise ValueError(_("an address must be a string"))
    candidate = address.strip()
    if not candidate:
        raise ValueError(_("an address is empty"))
    if len(candidate) > MAX_ADDRESS_LENGTH:
        raise ValueError(
            _("%(start)s… is longer than %(n)s characters")
            % {"start": candidate[:40], "n": MAX_ADDRESS_LENGTH}
        )
    # The sandbox and tests use the reserved .test domain; production never accepts it.
    return _validated(candidate, test_environment=not settings.PRODUCTION)


# The control characters a person may need named, which have no Unicode name of their own.
_CONTROL_NAMES = {
    "\t": "CHARACTER TABULATION",
    "\n": "LINE FEED",
    "\v": "LINE TABULATION",
    "\f": "FORM FEED",
    "\r": "CARRIAGE RETURN",
    "\x85": "NEXT LINE",
}


def stray_character_in(value: str, *, typed: bool = False) -> str | None:
    """The first character of ``value`` that is no part of an address and no space a writer
    means, named (``U+00A0 NO-BREAK SPACE``), or None: a control character (CR, LF, a tab),
    a line or paragraph separator, an unpaired surrogate, or white space other than the ASCII
    space. ``normalize_address`` strips white space around an address (``str.strip``, every
    kind) and email-validator refuses it only inside, so "ana@example.com\r\n" from an agent
    became another string than it sent, without a word: the draft's entries refuse it. ``typed``:
    a recipient field a person types several addresses in, where any space (a no-break space,
    U+3000 from a Japanese keyboard) and a tab (a paste from a spreadsheet) separate them;
    a line break or a control character is no one's typing there either."""
    for char in value:
        category = unicodedata.category(char)
        if typed and (category == "Zs" or char == "\t"):
            continue
        if category in ("Cc", "Zl", "Zp", "Cs") or (char.isspace() and char != " "):
            return _named(char)
    return None


def _named(char: str) -> str:
    """``U+000D CARRIAGE RETURN``: the code point and its name (a control character's too)."""
    return f"U+{ord(char):04X} {_CONTROL_NAMES.get(char) or unicodedata.name(char, '')}".rstrip()


def stray_character_refusal(value: str, *, field: str) -> str | None:
    """The refusal of ``value`` when it holds a character ``stray_character_in`` names, in the
    words a draft's recipient is refused in (``intents.services.content``), with ``field`` for
    the place it was written in; else None. For every entry of one address that
    ``normalize_address`` would otherwise take with that character stripped unsaid: a
    broadcast's row, a suppression, an allow-list's entry."""
    if (found := stray_character_in(value)) is None:
        return None
    return _(
        "%(field)s holds %(char)s: an address may hold no line break, control character "
        "or white space other than a space."
    ) % {"field": field, "char": found}


def letters_beyond_ascii(address: str) -> str:
    """The characters of ``address`` outside ASCII, each named once (``U+0456 CYRILLIC SMALL
    LETTER BYELORUSSIAN-UKRAINIAN I``), or "". An address is shown as it is, and
    ``b\u0456lling@example.com`` looks exactly like ``billing@example.com``: another mailbox,
    another person. The draft page names them beside the address; an approval from a list,
    whose rows cannot, refuses such an address (``intents.services.approval``)."""
    beyond = dict.fromkeys(char for char in address if not char.isascii())
    return ", ".join(f"U+{ord(char):04X} {unicodedata.name(char, '?')}" for char in beyond)


def shown_with_its_characters(written: str) -> str:
    """``written`` as text that can be shown, followed by its characters outside printable ASCII,
    each named once: "an\u200ba@example.com (U+200B ZERO WIDTH SPACE)". A refusal that names an
    entry as written, with no reason of its own ("Not an email address: ..."), read as a valid
    address when what it refused was a character no one sees."""
    unusual = dict.fromkeys(c for c in written if not (c.isascii() and c.isprintable()))
    named = ", ".join(_named(c) for c in unusual)
    return f"{_shown(written)} ({named})" if named else _shown(written)


def same_recipient_key(address: str) -> str:
    """What two addresses in their normal form (``normalize_address``) are compared by to tell
    that one list names a recipient twice: a draft's to, cc and bcc together
    (``intents.services.content``), a broadcast's rows (``intents.broadcast_content``). Both
    refuse such a list, naming the two spellings, rather than keep one: which of them the author
    meant, and in which list, is theirs to say.

    Compatibility characters folded too (NFKC), and case-folded: "\uff41na@example.com", with
    a full-width a that email-validator keeps in an internationalised local part, is another
    address to it than "ana@example.com", but the same customer to the person who approves the
    list, and two messages to them. Only for this comparison: what is stored and sent is the
    normal form."""
    return unicodedata.normalize("NFKC", address).casefold()


def normalize_domain(domain: str) -> str:
    """A domain as ``normalize_address`` writes the part after the "@" (lower-cased A-label);
    raises ValueError. Written in Unicode or in punycode, the same domain gives the same form."""
    if not isinstance(domain, str):
        raise ValueError("a domain must be a string")
    candidate = domain.strip()
    if not candidate or "@" in candidate:
        raise ValueError(f"{_shown(candidate)} is not a domain name")
    try:
        address = _validated(
            f"{_PROBE_LOCAL_PART}@{candidate}", test_environment=not settings.PRODUCTION
        )
    except ValueError:
        raise ValueError(f"{_shown(candidate)} is not a domain name") from None
    return address.rpartition("@")[2]


@lru_cache(maxsize=4096)
def _validated(candidate: str, *, test_environment: bool) -> str:
    """A pure function of its arguments (no DNS), so the worker's re-check of the same addresses
    before every send does not parse them again. Refusals raise and are not cached."""
    try:
        result = validate_email(
            candidate, check_deliverability=False, test_environment=test_environment
        )
    except EmailNotValidError as exc:
        raise ValueError(
            _("%(address)s is not a valid email address: %(reason)s")
            % {"address": _shown(candidate), "reason": refusal_reason(exc)}
        ) from None
    # email_validator checks that this ASCII form fits the length limits too. Composed (NFC)
    # again after lower-casing: a capital with no composed form (J + U+030C) lower-cases to a
    # letter that has one (U+01F0), and a second pass, as every check of a stored address
    # makes, gave another string than the first (a suppression or an allowed address missed).
    return unicodedata.normalize("NFC", f"{result.local_part}@{result.ascii_domain}".lower())


# email-validator's reasons, which are English only, by the part of the address they are about:
# the first whose words (lower-cased) are in the reason gives it in the reader's language.
_REASONS = (
    (("must have an @-sign", "at-sign"), gettext_lazy("it has no @ sign")),
    (("something before the @-sign",), gettext_lazy("nothing is written before the @ sign")),
    (("something after the @-sign",), gettext_lazy("nothing is written after the @ sign")),
    (("before the @-sign",), gettext_lazy("the part before the @ sign is not valid")),
    (
        ("after the @-sign", "part after the @-sign"),
        gettext_lazy("the part after the @ sign is not a valid domain name"),
    ),
)
_ANY_REASON = gettext_lazy("it is not written the way an email address is")


def refusal_reason(exc: EmailNotValidError) -> str:
    """Why email-validator refused an address, for the reader. In English its own sentence,
    which names the very characters at fault. In another language the sentence was put as it
    came after the translated one ("... ist keine gültige E-Mail-Adresse: An email address must
    have an @-sign."), on German and Spanish pages and in the API's rows for an agent that asked
    for German: it is our own words there, which name the part of the address at fault."""
    text = str(exc)
    if (get_language() or settings.LANGUAGE_CODE).split("-")[0] == "en":
        return text
    lowered = text.lower()
    for needles, reason in _REASONS:
        if any(needle.lower() in lowered for needle in needles):
            return str(reason)
    return str(_ANY_REASON)


def _shown(candidate: str) -> str:
    # Quoted as text that can always be shown: a lone surrogate in it made the page repeating
    # the error impossible to encode (a 500 instead of the refusal).
    return candidate.encode("utf-8", "backslashreplace").decode("utf-8")


# Scripts that are written together in one name (Japanese mixes Han, Hiragana and Katakana;
# Korean, Hangul and Han), after Unicode TS 39's "highly restrictive" profile.
_SCRIPT_GROUPS = {
    "CJK": "Han",
    "HIRAGANA": "Han",
    "KATAKANA": "Han",
    "HALFWIDTH": "Han",
    "HANGUL": "Han",
    "BOPOMOFO": "Han",
}


def _script_of(char: str) -> str | None:
    """The script of a letter, from its Unicode name's first word (``LATIN SMALL LETTER A``,
    ``CYRILLIC SMALL LETTER O``): the standard library has no Script property, and the name
    tells the scripts that look alike (Latin, Cyrillic, Greek) apart. None for what is not a
    letter (digits, dots, hyphens, combining marks), which belongs to every script."""
    if not unicodedata.category(char).startswith("L"):
        return None
    if char.isascii():
        return "Latin"
    first = unicodedata.name(char, "?").split(" ", 1)[0]
    if first == "MODIFIER":
        return None
    return _SCRIPT_GROUPS.get(first, first.title())


def lookalike_local_part(address: str) -> str | None:
    """Why the local part of ``address`` could pass for another one, or None: not composed
    (NFC), holding compatibility forms (NFKC would change them: a full-width b, U+FF42), or mixing
    letters of several scripts (a Cyrillic o, U+043E, among Latin letters). In the active language."""
    local = address.strip().rpartition("@")[0]
    if local != unicodedata.normalize("NFC", local):
        return _(
            "The part before the @ sign is not written in composed form (NFC): a letter and "
            "its accent are two characters there. Type the address again."
        )
    if compatible := letters_beyond_ascii(
        "".join(c for c in local if unicodedata.normalize("NFKC", c) != c)
    ):
        return _(
            "The part before the @ sign holds %(chars)s, a variant of an ordinary character "
            "that reads the same."
        ) % {"chars": compatible}
    scripts = sorted({s for s in map(_script_of, local) if s is not None})
    if len(scripts) > 1:
        return _(
            "The part before the @ sign mixes letters of several scripts (%(scripts)s), "
            "which can make it look like another address: %(chars)s."
        ) % {"scripts": ", ".join(scripts), "chars": letters_beyond_ascii(local)}
    return None


def account_address(address: str) -> str:
    """The form of a person's sign-in address (an invitation's, an account's): as
    ``normalize_address`` (lower-cased; the domain mapped by IDNA, UTS 46, to its A-label, so
    ``bob@\uff41cme.test`` with a full-width a is ``bob@acme.test``, whom it looks like), and refused
    when its local part could pass for another (``lookalike_local_part``). The address is each
    person's name to their colleagues, and the one form every lookup uses
    (``account_lookup_form``). Raises ValueError, in the active language."""
    if not isinstance(address, str):
        raise ValueError(_("an address must be a string"))
    if refusal := lookalike_local_part(address):
        raise ValueError(refusal)
    return normalize_address(address)


def account_lookup_form(address: str) -> str:
    """The form an account is looked up by (sign-in, lock-outs, operators' commands): the one
    ``account_address`` stores, whatever way the domain is typed. An address that form refuses
    is looked up as typed, lower-cased, as before: an account made before the rule (an operator's
    ``root@localhost`` from createsuperuser) keeps signing in."""
    try:
        return normalize_address(address)
    except ValueError:
        return address.strip().lower() if isinstance(address, str) else ""


def operator_account_address(address: str) -> str:
    """``account_address``, for the operators' ways of making or changing an account (Django's
    ``createsuperuser``, the operators' admin), with the refusals it names. One exception: an
    address all in ASCII that Django's validator takes but that form refuses for its domain alone
    (``root@localhost``, a special-use or literal domain, which email-validator refuses) is kept
    as typed, lower-cased, as operators have always made them: ``account_lookup_form`` finds it
    in that form, and no character of it can pass for another. Raises ValueError."""
    try:
        return account_address(address)
    except ValueError:
        typed = address.strip().lower()
        if not typed.isascii() or len(typed) > MAX_ADDRESS_LENGTH:
            raise
        try:
            django_validate_email(typed)
        except ValidationError:
            pass
        else:
            return typed
        raise
