"""Small display helpers for the review and outbox pages."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

from common.text import unseen_shown
from intents.models import Draft, SendIntent
from review import journal_words
from review.previews import previewable

register = template.Library()


@register.filter
def isolated(value) -> str:
    """Text an outsider chose (a sender's name), bidi-isolated: a right-to-left override in it
    cannot reorder the words around it on the page."""
    return format_html("<bdi>{}</bdi>", value)


@register.filter
def isolated_text(value) -> str:
    """Text an outsider chose, for plain text where no ``<bdi>`` can go (a page's ``<title>``):
    between U+2068 FIRST STRONG ISOLATE and U+2069 POP DIRECTIONAL ISOLATE, so a right-to-left
    override in a subject cannot reverse the rest of the browser tab's title.

    The text's own isolate controls are dropped first: a U+2069 of its own would close this
    isolate early, letting an override after it run on past the end, and an isolate it opened
    would take the closing U+2069 for itself. Its overrides and embeddings stay, as on the page:
    the closing U+2069 ends them (UAX #9, rule X6a)."""
    text = "".join(char for char in str(value or "") if char not in _ISOLATE_CONTROLS)
    return f"\u2068{text}\u2069"


# LRI, RLI, FSI, PDI.
_ISOLATE_CONTROLS = frozenset("\u2066\u2067\u2068\u2069")


@register.filter
def sender(value) -> str:
    """A customer message's sender: the display name bidi-isolated on its own, the address apart
    in its own isolate with its invisible characters shown as code points.

    One isolate around "name <address>" kept an override in the name (U+202E) running over the
    address: "Jane\u202e <evil@x.test>" read ">tset.x@live<", so a reviewer could not tell who
    wrote. The address is where ``intents.policy.on_thread`` finds it (the whole sender, or the
    part in angle brackets at its end)."""
    text = str(value or "")
    name, address = _sender_parts(text)
    if not address:
        return format_html("<bdi>{}</bdi>", name)
    shown = format_html('<bdi class="mono" data-sender-address>{}</bdi>', unseen_shown(address))
    if not name:
        return shown
    return format_html("<bdi>{}</bdi> &lt;{}&gt;", name, shown)


@register.filter
def addresses(value) -> str:
    """Addresses a customer's message named (its Reply-To), each as ``sender`` shows one: in an
    isolate of its own, its invisible characters as code points, comma-separated."""
    return format_html_join(", ", "{}", ((sender(address),) for address in value or ()))


def _sender_parts(text: str) -> tuple[str, str]:
    """(display name, address) of a stored sender, as ``on_thread`` reads it."""
    if text.endswith(">") and "<" in text:
        name, address = text[:-1].rsplit("<", 1)
        return name.strip(), address
    if "@" in text:
        return "", text
    return text, ""


@register.filter
def duration(value: timedelta | float | None) -> str:
    """A compact duration: 45 s, 12 min, 3 h 5 min, 2 d 4 h."""
    if value is None:
        return "\u2013"
    seconds = int(value.total_seconds() if isinstance(value, timedelta) else value)
    if seconds < 0:
        seconds = 0
    # Unit symbols, not words, so no plural forms: each language's own ("Std." and "T" in German).
    if seconds < 60:
        return _("%(n)s s") % {"n": seconds}
    minutes = seconds // 60
    if minutes < 60:
        return _("%(n)s min") % {"n": minutes}
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        if minutes:
            return _("%(h)s h %(min)s min") % {"h": hours, "min": minutes}
        return _("%(h)s h") % {"h": hours}
    days, hours = divmod(hours, 24)
    if hours:
        return _("%(d)s d %(h)s h") % {"d": days, "h": hours}
    return _("%(d)s d") % {"d": days}


@register.filter
def age(value: datetime | None) -> str:
    return duration(timezone.now() - value) if value else "\u2013"


@register.filter
def age_class(value: datetime | None) -> str:
    """Badge colour of a draft's waiting time: calm under an hour, amber after, red after 4 h."""
    if value is None:
        return ""
    waited = timezone.now() - value
    if waited >= timedelta(hours=4):
        return "bad"
    if waited >= timedelta(hours=1):
        return "warn"
    return "ok"


@register.filter
def until(value: datetime | None) -> str:
    if value is None:
        return "\u2013"
    left = value - timezone.now()
    if left.total_seconds() <= 0:
        return _("passed")
    return duration(left)


@register.filter
def deadline_class(value: datetime | None) -> str:
    if value is None:
        return ""
    left = value - timezone.now()
    if left <= timedelta(hours=2):
        return "bad"
    if left <= timedelta(hours=8):
        return "warn"
    return "info"


@register.filter
def preview_kind(content_type: str) -> str:
    """Which preview the draft page shows for a file of this type: "image", "pdf" or none."""
    return previewable(content_type)


@register.filter
def short_hash(value: str | None) -> str:
    # The digest's first 12 hex digits, after a scheme prefix ("2:...") if there is one.
    return (value or "").rpartition(":")[2][:12]


STATE_CLASS = {
    "queued": "info",
    "sending": "info",
    "accepted": "ok",
    "uncertain": "warn",
    "needs_attention": "bad",
    "failed": "bad",
    "blocked": "bad",
    "expired": "",
    "cancelled": "",
    "pending": "info",
    "approved": "ok",
    "rejected": "bad",
    "withdrawn": "",
    "sent": "info",
    "delivered": "ok",
    "bounced": "bad",
    "complained": "bad",
    "retry": "warn",
    "permanent": "bad",
    "not_found": "warn",
    "fenced": "warn",
}


@register.filter
def state_class(value: str) -> str:
    return STATE_CLASS.get(value or "", "")


@register.filter
def first(value):
    return value[0] if value else ""


@register.filter
def sla_state(draft) -> str:
    """Where a pending draft stands against its deadline: "breached", "warning" (inside its
    warning window), "ok", or "" without a deadline. Shown as words, not only as a colour."""
    due = getattr(draft, "sla_due_at", None)
    if due is None:
        return ""
    now = timezone.now()
    if due <= now:
        return "breached"
    warn = draft.sla_warn_at
    if warn is not None and warn <= now:
        return "warning"
    return "ok"


@register.filter
def claim_lapsed(draft) -> bool:
    expires = getattr(draft, "claim_expires_at", None)
    return expires is not None and expires <= timezone.now()


RECIPIENT_KINDS = {
    "to": pgettext_lazy("recipient field", "To"),
    "cc": pgettext_lazy("recipient field", "Cc"),
    "bcc": pgettext_lazy("recipient field", "Bcc"),
}


@register.filter
def recipient_kind(value: str) -> str:
    """The label of a recipient field (to, cc, bcc) in the reader's language."""
    return str(RECIPIENT_KINDS.get(value, value))


@register.filter
def journal_action(value: str) -> str:
    """A journal action in words; an action no table knows is shown as stored."""
    return journal_words.action_words(value)


@register.filter
def journal_actor(event) -> str:
    """Who wrote a journal row: the person, or the kind of process (its own label in a tooltip)."""
    return journal_words.actor_words(event)


@register.filter
def journal_reason(event) -> str:
    """A journal row's reason: the words of a reason the system wrote, or a person's as written."""
    return journal_words.reason_words(event)


@register.filter
def error_detail(detail: str) -> str:
    """A send's last error: the words of one the system wrote as fixed text, else as stored."""
    return journal_words.error_words(detail)


@register.filter
def journal_recipients(event) -> str:
    """The addresses a delivery row moved ("" for any other row)."""
    return journal_words.delivery_recipients(event)


@register.filter
def intent_state(value: str) -> str:
    """A send state (a journal row's from/to) by its label, as the badges show it."""
    if not value:
        return ""
    for choices in (SendIntent.State, Draft.Status):
        if value in choices.values:
            return str(choices(value).label)
    return value


@dataclass(frozen=True)
class Source:
    text: str
    url: str = ""


@register.filter
def sources(provenance) -> list[Source]:
    """The sources an agent named in a draft's provenance (a free object: ``sources`` is a list
    of texts or of {"title", "url"} objects, or one of them), each as it was written. The page
    asked each one for its ``title``, which a text has as a method (str.title): "kb/HowTo"
    read "Kb/Howto". Anything else is shown as JSON, never as Python."""
    given = provenance.get("sources") if isinstance(provenance, dict) else None
    if given in (None, "", [], {}):
        return []
    return [_source(item) for item in (given if isinstance(given, list) else [given])]


def _source(item) -> Source:
    if isinstance(item, str):
        return Source(item)
    if isinstance(item, dict) and set(item) <= {"title", "url"}:
        title, url = item.get("title"), item.get("url")
        return Source(_text(title), _text(url))
    return Source(_text(item))


def _text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
