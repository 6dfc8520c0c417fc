"""The audit page in words: each row of both journals as a sentence ("Ana revoked the agent token
triage-bot") whose object links to its page while it still exists. The CSV export keeps the raw
columns (console.views.audit_csv); this is only how a person reads them.

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
from django.utils.translation import ngettext_lazy, pgettext_lazy

from console.selectors import SUPPRESSION_REASONS
from intents.models import AgentEventEndpoint, Broadcast, Draft, SendIntent
from mailboxes.models import Mailbox
from tenants.actor_words import then_and_now
from tenants.models import AgentToken, Invitation, Membership, Tenant
from tenants.templatetags.zones import zoned
from webhooks.models import RecipientDelivery

# %(actor)s and %(object)s are filled in escaped; an action missing here reads as FALLBACK.
SENTENCES = {
    "tenant.connected": _("%(actor)s set up this tenant"),
    # An operator's actions (tenants.onboarding): whoever ran them is nobody in the tenant.
    "tenant.created": _("An operator created this tenant"),
    "tenant.suspended": _("An operator suspended this tenant: it is read-only"),
    "tenant.resumed": _("An operator resumed this tenant: it is active again"),
    "tenant.storage_quota_changed": _(
        "An operator changed the attachment storage quota of this tenant"
    ),
    "tenant.storage_recounted": _(
        "An operator corrected the attachment storage total of this tenant to what its files hold"
    ),
    "tenant.policies_changed": _("%(actor)s changed the tenant's %(object)s"),
    "tenant.deadlines_changed": _("%(actor)s changed the deadlines in the tenant's %(object)s"),
    "member.role_changed": _("%(actor)s changed the role of %(object)s"),
    "member.rights_changed": _("%(actor)s changed which mailboxes %(object)s may approve for"),
    "member.deactivated": _("%(actor)s deactivated %(object)s"),
    "member.reactivated": _("%(actor)s reactivated %(object)s"),
    "member.away": _("%(actor)s marked %(object)s away"),
    "member.back": _("%(actor)s marked %(object)s present"),
    "invitation.invited": _("%(actor)s invited %(object)s"),
    "invitation.revoked": _("%(actor)s revoked the invitation of %(object)s"),
    "invitation.accepted": _("%(actor)s accepted the invitation of %(object)s"),
    "invitation.declined": _("%(actor)s declined the invitation of %(object)s"),
    "user.created": _("The account of %(object)s was created"),
    "user.preferences_changed": _("%(actor)s changed their language or time zone"),
    "signin.succeeded": _("%(actor)s signed in"),
    "signin.failed": _("A sign-in as %(object)s failed"),
    "signin.second_factor_verified": _("%(actor)s confirmed their sign-in with a second factor"),
    "signin.second_factor_failed": _("%(actor)s gave a wrong second-factor code"),
    "signin.reauthenticated": _("%(actor)s confirmed who they are again"),
    "signin.two_factor_enrolled": _("%(actor)s set up two-factor sign-in"),
    "signin.recovery_codes_renewed": _("%(actor)s made new recovery codes"),
    "signin.passkey_added": _("%(actor)s added a passkey"),
    "signin.passkey_removed": _("%(actor)s removed a passkey"),
    "signin.passkey_failed": _("A passkey sign-in as %(object)s failed"),
    "signin.session_ended": _("%(actor)s ended a session of %(object)s"),
    "signin.password_changed": _("%(actor)s changed their password"),
    "signin.sso_linked": _("%(object)s was linked to the identity provider"),
    "signin.sso_refused": _("The identity provider's sign-in as %(object)s was refused"),
    "member.created_by_sso": _("The identity provider brought in %(object)s as a new member"),
    "member.two_factor_reset": _("%(actor)s reset the two-factor sign-in of %(object)s"),
    "signin.two_factor_operator_reset": _("An operator reset the two-factor sign-in of %(object)s"),
    "signin.password_operator_set": _("An operator set a new password for %(object)s"),
    "signin.lockout_released": _("An operator released the sign-in lock-out of %(object)s"),
    "user.changed_by_operator": _("An operator changed the account of %(object)s"),
    "tenant.left_without_admin": _(
        "An operator switched off the account of %(object)s, the last active admin of this "
        "tenant: it has none until an operator invites one"
    ),
    "tenant.sso_changed": _("%(actor)s changed the single sign-on settings"),
    "tenant.two_factor_required": _("%(actor)s changed whether members need two-factor sign-in"),
    "tenant.two_factor_optional": _("%(actor)s changed whether members need two-factor sign-in"),
    "signin.two_factor_removed": _("%(actor)s turned off their two-factor sign-in"),
    # Written beside member.two_factor_reset, in every tenant of the person: what was removed.
    "signin.two_factor_reset": _(
        "The authenticator, recovery codes and passkeys of %(object)s were removed"
    ),
    # No tenant holds this row (an operator belongs to none); named all the same.
    "user.created_as_operator": _("An operator account was created for %(object)s"),
    # No tenant's either: an account an operator added in the operators' admin.
    "user.created_by_operator": _("%(actor)s created the account %(object)s"),
    # No tenant's: the operators' admin lists it (manage.py reencrypt_secrets).
    "secrets.resealed": _("An operator re-sealed the stored secrets under a new encryption key"),
    # No tenant's: an operators' group (permissions in the operators' admin), listed there.
    "group.created": _("%(actor)s created the operators' group %(object)s"),
    "group.changed": _("%(actor)s changed the operators' group %(object)s"),
    "group.deleted": _("%(actor)s deleted the operators' group %(object)s"),
    "token.created": _("%(actor)s created the agent token %(object)s"),
    "token.revoked": _("%(actor)s revoked the agent token %(object)s"),
    "mailbox.created": _("%(actor)s connected the mailbox %(object)s"),
    "mailbox.key_installed": _("%(actor)s installed the AgentMail key of %(object)s"),
    "mailbox.enabled": _("%(actor)s enabled the mailbox %(object)s"),
    "mailbox.disabled": _("%(actor)s disabled the mailbox %(object)s"),
    "mailbox.key_refused": _(
        "AgentMail refused the key of %(object)s: its sends wait until the key works again"
    ),
    "mailbox.key_restored": _(
        "%(actor)s checked the key of %(object)s: AgentMail accepts it again, its sends resume"
    ),
    "mailbox.key_replaced": _("%(actor)s replaced the AgentMail key of %(object)s"),
    "mailbox.policy_changed": _("%(actor)s changed the recipient policy of %(object)s"),
    "mailbox.assignment_changed": _("%(actor)s changed the deadline and assignment of %(object)s"),
    "suppression.added": _("%(actor)s added %(object)s to the suppression list"),
    "suppression.removed": _("%(actor)s removed %(object)s from the suppression list"),
    "webhook.secret_stored": _("%(actor)s stored a new webhook secret for %(object)s"),
    "agent_events.endpoint_created": _("%(actor)s added the agent events endpoint %(object)s"),
    "agent_events.secret_rotated": _("%(actor)s rotated the signing secret of %(object)s"),
    "agent_events.endpoint_disabled": _("%(actor)s disabled the agent events endpoint %(object)s"),
    "agent_events.endpoint_enabled": _("%(actor)s enabled the agent events endpoint %(object)s"),
    "agent_events.endpoint_auto_disabled": _(
        "The agent events endpoint %(object)s was disabled after a day of failed deliveries"
    ),
    "agent_events.endpoint_gone": _(
        "The agent events endpoint %(object)s was disabled: its receiver answered 410 Gone"
    ),
    "agent_events.endpoint_deleted": _("%(actor)s deleted the agent events endpoint %(object)s"),
    "agent_events.delivery_resent": _("%(actor)s resent an event to %(object)s"),
    "draft.created": _("%(actor)s wrote %(object)s"),
    "draft.version_added": _("%(actor)s added a version to %(object)s"),
    "draft.approved": _("%(actor)s approved %(object)s"),
    "draft.rejected": _("%(actor)s rejected %(object)s"),
    "draft.withdrawn": _("%(actor)s withdrew %(object)s"),
    "draft.expired": _("%(object)s expired without a decision"),
    "draft.reopened": _("%(actor)s put %(object)s back in review"),
    "draft.bodies_purged": _("The retention policy purged the bodies of %(object)s"),
    "draft.attachment_bytes_purged": _("The retention policy purged the attachments of %(object)s"),
    "draft.taken": _("%(actor)s took %(object)s"),
    "draft.handed": _("%(actor)s handed %(object)s to a colleague"),
    "draft.released": _("%(actor)s released their claim on %(object)s"),
    "draft.assigned": _("%(object)s was assigned automatically"),
    "draft.claim_lapsed": _("The claim on %(object)s lapsed"),
    "draft.holder_cannot_decide": _(
        "%(object)s went back to the queue: its holder may no longer decide it"
    ),
    "draft.sla_warning": _("%(object)s is close to its deadline"),
    "draft.sla_breached": _("%(object)s missed its deadline"),
    "draft.escalated": _("%(object)s was escalated"),
    "draft.note_added": _("%(actor)s added a note to %(object)s"),
    "draft.approval_undone": _("%(actor)s undid the approval of %(object)s"),
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
    "intent.undone": _("%(actor)s undid %(object)s before it was sent"),
    "intent.lease_expired": _("The sending lease of %(object)s expired"),
    "intent.handed_back": _("A stopping worker handed %(object)s back to the queue"),
    "intent.key_refused": _("%(object)s waits: AgentMail refused its mailbox's key"),
    "broadcast.created": _("%(actor)s created the broadcast %(object)s"),
    "broadcast.recipients_replaced": _(
        "%(actor)s replaced the recipients of the broadcast %(object)s"
    ),
    "broadcast.approved": _("%(actor)s approved the broadcast %(object)s"),
    "broadcast.rejected": _("%(actor)s rejected the broadcast %(object)s"),
    "broadcast.paused": _("%(actor)s paused the broadcast %(object)s"),
    "broadcast.resumed": _("%(actor)s resumed the broadcast %(object)s"),
    "broadcast.cancelled": _("%(actor)s cancelled the broadcast %(object)s"),
    "broadcast.fan_out_page": _("%(actor)s created a batch of sends of the broadcast %(object)s"),
    "broadcast.fanned_out": _("%(actor)s created the last sends of the broadcast %(object)s"),
    "broadcast.completed": _("The broadcast %(object)s is complete: every send is settled"),
    "broadcast.bodies_purged": _(
        "The retention policy purged the bodies of the broadcast %(object)s"
    ),
}
# Actions written with a computed code: each family's sentence (DELIVERY) stands for all of it.
FAMILIES = ("delivery.",)
# The same actions when an operator took them (the row's data has "by_operator").
BY_OPERATOR = {
    "invitation.invited": _("An operator invited %(object)s"),
}
FALLBACK = _("%(actor)s: %(action)s, %(object)s")
# Added to the sentence of a change that stops sends (tenants.send_stops) when some were already
# past their last check: those went on to the provider after it.
IN_FLIGHT = ngettext_lazy(
    "%(count)d send was already on its way and was not stopped",
    "%(count)d sends were already on their way and were not stopped",
    "count",
)
DELIVERY = _("Delivery of %(object)s: %(action)s")

# Actors without a person or token: the kinds and labels the journals write, in words.
ACTOR_KINDS = {
    "system": _("the system"),
    "sweep": _("the sweep"),
    "worker": _("the send worker"),
    "webhook": _("a webhook"),
    "agent": _("an agent"),
    "person": pgettext_lazy("audit actor", "someone"),
    "auto-assign": _("automatic assignment"),
}

# The names of the details' keys a person reads; other keys show as they are, "_" as spaces.
FIELD_NAMES = {
    "review_deadline_hours": _("review deadline (hours)"),
    "second_approver_on_edit": _("second person after an edit"),
    "retention_days": _("retention (days)"),
    "send_hold_seconds": _("undo window (seconds)"),
    "attachment_storage_quota": _("attachment storage quota (bytes)"),
    "attachment_storage_used": _("attachment storage in use (bytes)"),
    "own_quota": _("set for this tenant alone"),
    "own_domains": _("own domains"),
    "sla_minutes": _("target (minutes)"),
    "sla_warning_minutes": _("warning window (minutes)"),
    "escalate_to_id": _("escalate to"),
    "escalate_to_role": _("escalate to role"),
    "auto_assign": _("automatic assignment"),
    "policy_mode": _("recipients"),
    "allowed_domains": _("allowed domains"),
    "allowed_addresses": _("allowed addresses"),
    "display_name": _("name"),
    "approve_all_mailboxes": _("every mailbox"),
    "all_mailboxes": _("every mailbox"),
    "mailboxes_before": _("mailboxes before"),
    "mailboxes_after": _("mailboxes after"),
    "mailbox_ids": _("mailboxes"),
    "sends_in_flight": _("sends already on their way"),
    "email": _("email"),
    "recipients": _("recipients"),
    "from_list": _("approved from the queue's list"),
    "full_name": _("name"),
    "is_active": _("may sign in"),
    "is_staff": _("operator"),
    "is_superuser": _("operator with every right"),
    "address": _("address"),
    "name": _("name"),
    "note": _("reason"),
    "reason": _("reason"),
    "by_operator": _("by an operator"),
    "role": _("role"),
    "scopes": _("scopes"),
    "prefix": _("prefix"),
    "expires_at": _("expires"),
    "url": _("URL"),
    "event_types": _("events"),
    "mailbox_id": _("mailbox"),
    "delivery_id": _("delivery"),
    "resend_id": _("new delivery"),
    "was": _("was"),
    "language": _("language"),
    "time_zone": _("time zone"),
    "holder": _("holder"),
    "previous_holder": _("previous holder"),
    "escalated_to": _("escalated to"),
    "passed_over": _("passed over"),
    "membership_id": _("member"),
    "created": _("sends created"),
    "api_key_id": _("AgentMail key"),
    "old_api_key_id": _("previous AgentMail key"),
    "pod_id": _("AgentMail pod"),
    "attempt": _("attempt"),
    "attempt_committed": _("attempt recorded"),
    "base_version": _("based on version"),
    "broadcast": _("broadcast"),
    "code": _("code"),
    "content_hash": _("content hash"),
    "previous_hash": _("previous content hash"),
    "copied_from_version": _("copied from version"),
    "earlier_intent": _("earlier send"),
    "earlier_intent_state": _("earlier send's state"),
    "earlier_may_have_gone_out": _("earlier send may have gone out"),
    "hold_until": _("held until"),
    "idempotency_key": _("idempotency key"),
    "length": _("length (characters)"),
    "messages_seen": _("customer messages seen"),
    "not_after_cleared": _("send-by time cleared"),
    "provider_message_id": _("AgentMail message id"),
    "rule": _("rule"),
    "seconds_left": _("seconds left"),
    "skipped": _("skipped"),
    "through_position": _("through recipient"),
    "version": _("version"),
    # The sign-in audit's details (tenants.signin_audit).
    "user_agent": _("browser"),
    "ip": _("IP address"),
    "sessions_ended": _("sessions ended"),
    "ip_addresses": _("IP addresses"),
    "method": _("how"),
    "factor": _("second factor"),
    "recovery_codes_left": _("recovery codes left"),
    "passkeys_removed": _("passkeys removed"),
    "issuer": _("identity provider"),
    "subject": _("identity at the provider"),
    "replaced_links": _("links to an earlier provider removed"),
    "account_created": _("new account"),
}
# A detail whose key means something else in one action: shown under another key there.
# (Elsewhere "created" counts a broadcast's sends.)
RENAMED_KEYS = {("signin.sso_linked", "created"): "account_created"}
# Keys of the details that are structure, not a value shown under their own name.
STRUCTURAL_KEYS = frozenset({"before", "after", "from", "to"})

# The keys of the details that hold a person's user id, a mailbox's id (or a list of them), or a
# membership's id: shown by name, never as a bare number. A draft's escalation writes its target
# as "to", which elsewhere holds a role or a status.
PERSON_KEYS = frozenset({"holder", "previous_holder", "escalate_to_id", "passed_over"})
MAILBOX_KEYS = frozenset({"mailbox_id", "mailbox_ids", "mailboxes_before", "mailboxes_after"})
MEMBERSHIP_KEYS = frozenset({"membership_id"})
# A note's id says nothing on this page: the sentence links to the draft that shows the note.
HIDDEN_KEYS = frozenset({"note_id"})
GONE_PERSON = _("a former member")
GONE_MAILBOX = _("a removed mailbox")


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
    for b in Broadcast.objects.filter(tenant=tenant, pk__in=ids["broadcast"]).only(
        "pk", "name", "subject"
    ):
        keep("broadcast", b.pk, b.name or b.subject, reverse("broadcast", args=[slug, b.pk]))
    for e in AgentEventEndpoint.objects.filter(tenant=tenant, pk__in=ids["agenteventendpoint"]):
        keep("agenteventendpoint", e.pk, e.url, reverse("agent_events", args=[slug]))
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


# The keys whose values are codes of a choice. "from"/"to" hold a role (member.role_changed) or
# a mailbox status (mailbox.enabled/disabled): their codes do not overlap.
# How a sign-in or a confirmation was made (tenants: the session's method, the second factor).
SIGNIN_WAYS = [
    ("password", _("password")),
    ("passkey", _("passkey")),
    ("sso", _("single sign-on")),
    ("totp", _("authenticator app")),
    ("recovery_code", _("recovery code")),
]
_STATES = [*Membership.Role.choices, *Mailbox.Status.choices, *Mailbox.PolicyMode.choices]
CODED = {
    "from": _STATES,
    "to": _STATES,
    "role": Membership.Role.choices,
    "escalate_to_role": Membership.Role.choices,
    "policy_mode": Mailbox.PolicyMode.choices,
    "was": list(SUPPRESSION_REASONS.items()),
    "method": SIGNIN_WAYS,
    "factor": SIGNIN_WAYS,
}


# Why an invitation was revoked (tenants: invitation_revoke, invitations_revoke_pending's
# callers), by code: the "reason" of other actions is another vocabulary, or a person's words.
INVITATION_REVOKED_WHY = {
    "revoked": _("revoked by an admin"),
    "replaced": _("replaced by a newer invitation"),
    "inviter_no_longer_admin": _("the person who invited them is no longer an admin"),
    "inviter_deactivated": _("the person who invited them was deactivated"),
    "joined_by_sso": _("joined through single sign-on"),
}
CODED_IN = {"invitation.revoked": {"reason": INVITATION_REVOKED_WHY}}


def _worded(action: str, data):
    """The row's data with the codes that only ``action`` writes in words."""
    codes = CODED_IN.get(action)
    if not codes or not isinstance(data, dict):
        return data
    return {
        k: codes[k].get(v, v) if k in codes and isinstance(v, str) else v for k, v in data.items()
    }


# The keys whose values are ISO times: shown in the reader's zone, like every time on the page.
TIMES = {"expires_at"}


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
                reason=row["reason"],
            )
        )
    return lines
