"""The audit page in words: each row of both journals as a sentence ("Ana revoked the agent token
triage-bot") whose object links to its page while it still exists. The CSV export keeps the raw
columns (console.views.audit_csv); this is only how a person reads them.

Objects are looked up once per page and per kind (a fixed number of queries for 100 rows).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.urls import reverse
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext_lazy as _

from intents.models import Draft, SendIntent
from mailboxes.models import Mailbox
from tenants.models import AgentToken, Invitation, Membership, Tenant

# %(actor)s and %(object)s are filled in escaped; an action missing here reads as FALLBACK.
SENTENCES = {
    "tenant.connected": _("%(actor)s set up this tenant"),
    "tenant.policies_changed": _("%(actor)s changed the tenant's %(object)s"),
    "member.role_changed": _("%(actor)s changed the role of %(object)s"),
    "member.rights_changed": _("%(actor)s changed which mailboxes %(object)s may approve for"),
    "member.deactivated": _("%(actor)s deactivated %(object)s"),
    "member.reactivated": _("%(actor)s reactivated %(object)s"),
    "invitation.invited": _("%(actor)s invited %(object)s"),
    "invitation.revoked": _("%(actor)s revoked the invitation of %(object)s"),
    "invitation.accepted": _("%(actor)s accepted the invitation of %(object)s"),
    "invitation.declined": _("%(actor)s declined the invitation of %(object)s"),
    "user.created": _("The account of %(object)s was created"),
    "token.created": _("%(actor)s created the agent token %(object)s"),
    "token.revoked": _("%(actor)s revoked the agent token %(object)s"),
    "mailbox.created": _("%(actor)s connected the mailbox %(object)s"),
    "mailbox.key_installed": _("%(actor)s installed the AgentMail key of %(object)s"),
    "mailbox.enabled": _("%(actor)s enabled the mailbox %(object)s"),
    "mailbox.disabled": _("%(actor)s disabled the mailbox %(object)s"),
    "mailbox.policy_changed": _("%(actor)s changed the recipient policy of %(object)s"),
    "suppression.added": _("%(actor)s added %(object)s to the suppression list"),
    "suppression.removed": _("%(actor)s removed %(object)s from the suppression list"),
    "webhook.secret_stored": _("%(actor)s stored a new webhook secret for %(object)s"),
    "draft.created": _("%(actor)s wrote %(object)s"),
    "draft.version_added": _("%(actor)s added a version to %(object)s"),
    "draft.approved": _("%(actor)s approved %(object)s"),
    "draft.rejected": _("%(actor)s rejected %(object)s"),
    "draft.withdrawn": _("%(actor)s withdrew %(object)s"),
    "draft.expired": _("%(object)s expired without a decision"),
    "draft.reopened": _("%(actor)s put %(object)s back in review"),
    "draft.bodies_purged": _("The retention policy purged the bodies of %(object)s"),
    "intent.created": _("%(actor)s queued %(object)s"),
    "intent.claimed": _("%(actor)s started sending %(object)s"),
    "intent.accepted": _("AgentMail accepted %(object)s"),
    "intent.uncertain": _("The outcome of %(object)s is uncertain"),
    "intent.retry_scheduled": _("%(actor)s scheduled another try of %(object)s"),
    "intent.reconcile_pending": _("%(actor)s is checking with AgentMail whether %(object)s left"),
    "intent.needs_attention": _("%(object)s needs a person"),
    "intent.resolved_accepted": _("%(actor)s marked %(object)s as sent"),
    "intent.failed": _("%(object)s failed"),
    "intent.blocked": _("%(object)s was blocked before sending"),
    "intent.held": _("%(object)s is held"),
    "intent.released": _("%(actor)s released %(object)s"),
    "intent.cancelled": _("%(actor)s cancelled %(object)s"),
    "intent.expired": _("%(object)s expired before it was sent"),
}
FALLBACK = _("%(actor)s: %(action)s, %(object)s")
DELIVERY = _("Delivery of %(object)s: %(action)s")


@dataclass
class AuditLine:
    created_at: object
    src: str
    action: str
    sentence: SafeString
    details: list[tuple[str, str]]
    reason: str


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
    if str(tenant.pk) in {row["obj_id"] for row in rows if row["obj_type"] == "tenant"}:
        keep("tenant", tenant.pk, _("policies"), reverse("admin_policies", args=[slug]))
    return found


def _gone_name(row: dict) -> str:
    """The name of an object that no longer exists (or has no page), from what its row kept."""
    data = row["data"] if isinstance(row["data"], dict) else {}
    for key in ("name", "email", "address"):
        if isinstance(data.get(key), str) and data[key]:
            return data[key]
    kind = {
        "draft": _("draft"),
        "sendintent": _("send"),
        "tenant": _("policies"),
        "webhookendpoint": _("webhook endpoint"),
    }.get(row["obj_type"], row["obj_type"].replace("_", " "))
    return f"{kind} #{row['obj_id']}" if row["obj_id"] and row["obj_type"] != "tenant" else kind


def _value(value) -> str:
    if isinstance(value, bool):
        return str(_("yes") if value else _("no"))
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value) or "—"
    if value in (None, ""):
        return "—"
    return str(value)


def _details(data) -> list[tuple[str, str]]:
    """The row's data as (what, value) pairs: a before/after pair becomes what changed."""
    if not isinstance(data, dict):
        return []
    before, after = data.get("before"), data.get("after")
    if isinstance(before, dict) and isinstance(after, dict):
        return [
            (key.replace("_", " "), f"{_value(before.get(key))} → {_value(after.get(key))}")
            for key in sorted(set(before) | set(after))
            if before.get(key) != after.get(key)
        ]
    if "from" in data and "to" in data:
        return [(str(_("changed")), f"{_value(data['from'])} → {_value(data['to'])}")]
    return [
        (key.replace("_", " "), _value(value))
        for key, value in sorted(data.items())
        if not isinstance(value, dict)
    ]


def audit_lines(tenant: Tenant, rows: list[dict]) -> list[AuditLine]:
    names = _name_tables(tenant, rows)
    lines = []
    for row in rows:
        named = names.get((row["obj_type"], row["obj_id"]))
        obj: str
        if named:
            obj = format_html('<a href="{}">{}</a>', named[1], named[0])
        else:
            obj = conditional_escape(_gone_name(row)) if row["obj_type"] else ""
        action = row["action"]
        template = SENTENCES.get(action) or (
            DELIVERY if action.startswith("delivery.") else FALLBACK
        )
        values = {
            "actor": conditional_escape(row["actor_display"] or _("someone")),
            "object": obj,
            "action": conditional_escape(action.partition(".")[2] or action).replace("_", " "),
        }
        sentence = conditional_escape(str(template)) % values
        lines.append(
            AuditLine(
                created_at=row["created_at"],
                src=row["src"],
                action=action,
                # Every piece was escaped above (the template, the actor, the object).
                sentence=mark_safe(sentence[:1].upper() + sentence[1:]),  # noqa: S308
                details=_details(row["data"]),
                reason=row["reason"],
            )
        )
    return lines
