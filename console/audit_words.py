"""The audit page in words: each row of both journals as a sentence ("Ana revoked the agent token
triage-bot") whose object links to its page while it still exists, and the reasons the system
wrote in the reader's words (``intents.reason_words``). The CSV export keeps the raw columns
(console.views.audit_csv), the stored reason among them: it is evidence, read beside the codes;
this is only how a person reads them.

Objects are looked up once per page and per kind (a fixed number of queries for 100 rows).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.urls import reverse
from django.utils import timezone
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from common.egress import url_shown
from console.audit_vocabulary import (
    ACTOR_KINDS,
    BY_OPERATOR,
    CODED,
    CODED_IN,
    DELIVERY,
    FALLBACK,
    FAMILIES,
    FIELD_NAMES,
    GONE_MAILBOX,
    GONE_PERSON,
    HIDDEN_KEYS,
    IN_FLIGHT,
    MAILBOX_KEYS,
    MEMBERSHIP_KEYS,
    PERSON_KEYS,
    RENAMED_KEYS,
    SENTENCES,
    TIMES,
)
from intents.models import AgentEventEndpoint, Broadcast, Draft, SendIntent
from intents.reason_words import system_reason_words, system_words
from mailboxes.models import Mailbox
from tenants.actor_words import then_and_now
from tenants.models import AgentToken, Invitation, Membership, Tenant
from tenants.templatetags.zones import zoned
from webhooks.models import RecipientDelivery


@dataclass
class AuditLine:
    created_at: object
    src: str
    action: str
    sentence: SafeString
    details: list[tuple[str, str]]
    # As the page shows it: a reason the system wrote in the reader's words, any other as written.
    reason: str
    # The stored reason when ``reason`` is the system's words for it; "" for someone's own text.
    reason_code: str


def _name_tables(tenant: Tenant, rows: list[dict]) -> dict[tuple[str, str], tuple[str, str]]:
    """(type, id) -> (name, url) of the objects of these rows that still exist."""
    ids: dict[str, set[int]] = defaultdict(set)
    for row in rows:
        if row["obj_id"] and row["obj_id"].isdigit():
            ids[row["obj_type"]].add(int(row["obj_id"]))
    slug, found = tenant.slug, {}

    def keep(kind, pk, name, url):
        found[kind, str(pk)] = (name, url)

    for t in AgentToken.objects.filter(tenant=tenant, pk__in=ids["agent_token"]):
        keep("agent_token", t.pk, t.name, reverse("token_list", args=[slug]))
    for m in Membership.objects.filter(tenant=tenant, pk__in=ids["membership"]).select_related(
        "user"
    ):
        keep("membership", m.pk, m.user.display_name, reverse("admin_member", args=[slug, m.pk]))
    for m in Membership.objects.filter(tenant=tenant, user_id__in=ids["user"]).select_related(
        "user"
    ):
        keep("user", m.user_id, m.user.display_name, reverse("admin_member", args=[slug, m.pk]))
    for mb in Mailbox.objects.filter(tenant=tenant, pk__in=ids["mailbox"]):
        keep("mailbox", mb.pk, mb.address, reverse("mailbox_detail", args=[slug, mb.pk]))
    for inv in Invitation.objects.filter(tenant=tenant, pk__in=ids["invitation"]):
        keep("invitation", inv.pk, inv.email, reverse("admin_members", args=[slug]))
    for pk in Draft.objects.filter(tenant=tenant, pk__in=ids["draft"]).values_list("pk", flat=True):
        keep("draft", pk, _("draft #%(id)s") % {"id": pk}, reverse("draft", args=[slug, pk]))
    for pk in SendIntent.objects.filter(tenant=tenant, pk__in=ids["sendintent"]).values_list(
        "pk", flat=True
    ):
        url = reverse("outbox_intent", args=[slug, pk])
        keep("sendintent", pk, _("send #%(id)s") % {"id": pk}, url)
    for b in Broadcast.objects.filter(tenant=tenant, pk__in=ids["broadcast"]).only(
        "pk", "name", "subject"
    ):
        keep("broadcast", b.pk, b.name or b.subject, reverse("broadcast", args=[slug, b.pk]))
    for e in AgentEventEndpoint.objects.filter(tenant=tenant, pk__in=ids["agenteventendpoint"]):
        keep("agenteventendpoint", e.pk, e.url_shown, reverse("agent_events", args=[slug]))
    if str(tenant.pk) in {row["obj_id"] for row in rows if row["obj_type"] == "tenant"}:
        keep("tenant", tenant.pk, _("policies"), reverse("admin_policies", args=[slug]))
    return found


def _ids(value) -> list[int]:
    values = value if isinstance(value, list) else [value]
    return [v for v in values if type(v) is int]


def _data_dicts(data) -> list[dict]:
    """The row's data and its before/after halves: the dicts whose values the details show."""
    if not isinstance(data, dict):
        return []
    return [data, *(d for d in (data.get("before"), data.get("after")) if isinstance(d, dict))]


def _id_kind(key: str, action: str) -> tuple[str, str, object] | None:
    """For a detail holding an id (or ids): what it names ("person", "mailbox", "membership"),
    the key it is shown under, and the words for one that is gone; None for any other detail."""
    if key == "to" and action == "draft.escalated":
        return "person", "escalated_to", GONE_PERSON
    if key in PERSON_KEYS:
        return "person", key, GONE_PERSON
    if key in MAILBOX_KEYS:
        return "mailbox", key, GONE_MAILBOX
    if key in MEMBERSHIP_KEYS:
        return "membership", key, GONE_PERSON
    return None


def _id_names(tenant: Tenant, rows: list[dict]) -> dict[tuple[str, int], str]:
    """("person"|"mailbox"|"membership", id) -> name, for the ids the rows' details hold; one
    query per kind, each filtered by the tenant."""
    wanted: dict[str, set[int]] = defaultdict(set)
    for row in rows:
        for data in _data_dicts(row["data"]):
            for key, value in data.items():
                if named_as := _id_kind(key, row["action"]):
                    wanted[named_as[0]].update(_ids(value))
    found: dict[tuple[str, int], str] = {}
    if wanted["person"]:
        for m in Membership.objects.filter(
            tenant=tenant, user_id__in=wanted["person"]
        ).select_related("user"):
            found["person", m.user_id] = m.user.display_name
    if wanted["membership"]:
        for m in Membership.objects.filter(
            tenant=tenant, pk__in=wanted["membership"]
        ).select_related("user"):
            found["membership", m.pk] = m.user.display_name
    if wanted["mailbox"]:
        for pk, address in Mailbox.objects.filter(
            tenant=tenant, pk__in=wanted["mailbox"]
        ).values_list("pk", "address"):
            found["mailbox", pk] = address
    return found


def _named(value, kind: str, names: dict[tuple[str, int], str], gone) -> object:
    if isinstance(value, list):
        return [_named(v, kind, names, gone) for v in value]
    if type(value) is not int:
        return value
    return names.get((kind, value)) or str(gone)


def _with_names(row: dict, names: dict[tuple[str, int], str]):
    """The row's data with its ids as names, and the keys a reader has no use for left out."""
    data = row["data"]
    if not isinstance(data, dict):
        return data

    def name(part: dict) -> dict:
        out = {}
        for key, value in part.items():
            if key in HIDDEN_KEYS:
                continue
            if named_as := _id_kind(key, row["action"]):
                kind, shown_as, gone = named_as
                out[shown_as] = _named(value, kind, names, gone)
            else:
                out[RENAMED_KEYS.get((row["action"], key), key)] = value
        return out

    named = name(data)
    for half in ("before", "after"):
        if isinstance(data.get(half), dict):
            named[half] = name(data[half])
    return named


def _gone_name(row: dict) -> str:
    """The name of an object that no longer exists (or has no page), from what its row kept."""
    data = row["data"] if isinstance(row["data"], dict) else {}
    for key in ("name", "email", "address"):
        if isinstance(data.get(key), str) and data[key]:
            return data[key]
    kind = {
        "draft": _("draft"),
        "sendintent": _("send"),
        "broadcast": _("broadcast"),
        "tenant": _("policies"),
        "webhookendpoint": _("webhook endpoint"),
        "agent_token": _("agent token"),
        "membership": _("member"),
        "user": _("person"),
        "mailbox": _("mailbox"),
        "invitation": _("invitation"),
        "suppression": _("suppressed address"),
    }.get(row["obj_type"], row["obj_type"].replace("_", " "))
    return f"{kind} #{row['obj_id']}" if row["obj_id"] and row["obj_type"] != "tenant" else kind


def _coded(key: str, value):
    """A stored code (a role, a policy mode, a status, a suppression reason) as its label, for
    the keys that hold one; anything else as it was."""
    if key == "detail" and isinstance(value, str):
        # AgentMail's refusal of a mailbox's key (mailboxes.key_health): its answer as it wrote
        # it, or a refusal the worker put in words of its own (a label lookup's).
        words = system_words(value)
        return value if words is None else str(words)
    if key == "url" and isinstance(value, str):
        # An endpoint's URL with an IDN host, with the xn-- form its events go to beside it.
        return url_shown(value)
    choices = CODED.get(key)
    if isinstance(value, str) and choices is not None:
        return dict(choices).get(value, value)
    if key in TIMES and isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            return value
        return zoned(timezone.localtime(when)) if timezone.is_aware(when) else value
    return value


def _value(value) -> str:
    if isinstance(value, bool):
        return str(_("yes") if value else _("no"))
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value) or "—"
    if value in (None, ""):
        return "—"
    return str(value)


def _worded(action: str, data):
    """The row's data with the codes that only ``action`` writes in words."""
    codes = CODED_IN.get(action)
    if not codes or not isinstance(data, dict):
        return data
    return {
        k: codes[k].get(v, v) if k in codes and isinstance(v, str) else v for k, v in data.items()
    }


def _field(key: str) -> str:
    return str(FIELD_NAMES.get(key) or key.replace("_", " "))


def _details(data) -> list[tuple[str, str]]:
    """The row's data as (what, value) pairs: a before/after pair becomes what changed."""
    if not isinstance(data, dict):
        return []
    before, after = data.get("before"), data.get("after")
    if isinstance(before, dict) and isinstance(after, dict):
        return [
            (
                _field(key),
                f"{_value(_coded(key, before.get(key)))} → {_value(_coded(key, after.get(key)))}",
            )
            for key in sorted(set(before) | set(after))
            if before.get(key) != after.get(key)
        ]
    if "from" in data and "to" in data:
        old, new = _coded("from", data["from"]), _coded("to", data["to"])
        return [(str(_("changed")), f"{_value(old)} → {_value(new)}")]
    return [
        (_field(key), _recipients(value) if key == "recipients" else _value(_coded(key, value)))
        for key, value in sorted(data.items())
        if not isinstance(value, dict) or key == "recipients"
    ]


def _recipients(value) -> str:
    """An approval's recipients (``{"to": [...], "cc": [...], "bcc": [...]}``) as one line by
    header; a broadcast's approval keeps only their count."""
    if not isinstance(value, dict):
        return _value(value)
    return "; ".join(
        f"{kind}: {_value(addresses)}" for kind, addresses in value.items() if addresses
    )


def _action_words(action: str) -> str:
    """The verb of an action the tables above do not name: a delivery's state by the label its
    badges show ("Delivered", translated), else the code's last part."""
    kind, _dot, verb = action.partition(".")
    if kind == "delivery" and verb in RecipientDelivery.State.values:
        return str(RecipientDelivery.State(verb).label)
    return (verb or action).replace("_", " ")


def has_sentence(action: str) -> bool:
    """Whether the page reads ``action`` as its own sentence rather than as FALLBACK."""
    return action in SENTENCES or action.startswith(FAMILIES)


def _actor(row: dict) -> str:
    """Who acted, escaped: as they were then, with their address today when it has changed. A
    machine comes as its kind (console.selectors): its process label is in the export."""
    now = row.get("actor_now") or ""
    if now and row["actor_name"] != now:
        return then_and_now(row["actor_name"], now)
    return conditional_escape(
        ACTOR_KINDS.get(row["actor_display"], row["actor_display"])
        or pgettext_lazy("audit actor", "someone")
    )


def _sends_in_flight(data) -> int:
    """How many sends a change that stops them found already on their way (0 for any other
    row, or a value the row did not write as a count)."""
    count = data.get("sends_in_flight") if isinstance(data, dict) else None
    return count if type(count) is int and count > 0 else 0


def _reason(row: dict) -> dict[str, str]:
    """The row's reason as the page gives it (``reason``), with the stored one kept for its
    tooltip (``reason_code``) when the system wrote it; the export keeps the stored one only."""
    words = system_reason_words(
        actor_kind=row["actor_kind"], action=row["action"], reason=row["reason"]
    )
    if words is None:
        return {"reason": row["reason"], "reason_code": ""}
    return {"reason": str(words), "reason_code": row["reason"]}


def audit_lines(tenant: Tenant, rows: list[dict]) -> list[AuditLine]:
    names = _name_tables(tenant, rows)
    id_names = _id_names(tenant, rows)
    lines = []
    for row in rows:
        named = names.get((row["obj_type"], row["obj_id"]))
        obj: str
        if named:
            obj = format_html('<a href="{}">{}</a>', named[1], named[0])
        else:
            obj = conditional_escape(_gone_name(row)) if row["obj_type"] else ""
        action = row["action"]
        by_operator = isinstance(row["data"], dict) and row["data"].get("by_operator") is True
        template = (
            (BY_OPERATOR.get(action) if by_operator else None)
            or SENTENCES.get(action)
            or (DELIVERY if action.startswith(FAMILIES) else FALLBACK)
        )
        values = {
            "actor": _actor(row),
            "object": obj,
            "action": conditional_escape(_action_words(action)),
        }
        sentence = conditional_escape(str(template)) % values
        if in_flight := _sends_in_flight(row["data"]):
            sentence += "; " + conditional_escape(str(IN_FLIGHT % {"count": in_flight}))
        lines.append(
            AuditLine(
                created_at=row["created_at"],
                src=row["src"],
                action=action,
                # Every piece was escaped above (the template, the actor, the object).
                sentence=mark_safe(sentence[:1].upper() + sentence[1:]),  # noqa: S308
                details=_details(_worded(action, _with_names(row, id_names))),
                **_reason(row),
            )
        )
    return lines
