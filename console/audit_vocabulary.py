"""The audit page's words: a sentence for each action, names for the details' keys, and the
codes written in words (``console.audit_words`` puts them together, row by row)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext_lazy, pgettext_lazy

from console.selectors import SUPPRESSION_REASONS
from mailboxes.models import Mailbox
from tenants.models import Membership

# %(actor)s and %(object)s are filled in escaped; an action missing here reads as FALLBACK.
SENTENCES = {
    "tenant.connected": _("%(actor)s set up this tenant"),
    # The demo's only (mailboxes.demo): a sandbox that does not know the tenant's pod.
    "tenant.pod_forgotten": _(
        "The demo set-up found this tenant's AgentMail pod gone from the sandbox and forgot it, "
        "to provision a new one"
    ),
    # mailboxes.recovery: made again by an operator's command, or an admin.
    "tenant.pod_lost": _(
        "AgentMail no longer had this tenant's pod: %(actor)s had it made again, with every "
        "inbox, under new AgentMail ids"
    ),
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
    "signin.second_step_failures_shown": _(
        "%(actor)s was told of sign-ins with their password that failed the second step"
    ),
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
    "mailbox.inbox_lost": _(
        "AgentMail no longer had the inbox of %(object)s: %(actor)s had it made again under a "
        "new AgentMail id"
    ),
    "mailbox.storage_recounted": _(
        "An operator corrected the attachment storage total of %(object)s to what its files hold"
    ),
    "mailbox.policy_changed": _("%(actor)s changed the recipient policy of %(object)s"),
    "mailbox.assignment_changed": _("%(actor)s changed the deadline and assignment of %(object)s"),
    "suppression.added": _("%(actor)s added %(object)s to the suppression list"),
    "suppression.removed": _("%(actor)s removed %(object)s from the suppression list"),
    "webhook.secret_stored": _("%(actor)s stored a new webhook secret for %(object)s"),
    "webhook.events_reapplied": _(
        "AgentMail announced mail of %(object)s before it recorded its new inbox: those "
        "events were applied once it did"
    ),
    # webhooks.services.failures: an operator's command, after fixing why they could not apply.
    "webhook.events_retried": _(
        "An operator put back webhook events that could not be applied, to be applied again"
    ),
    # webhooks.services.retention, and an applier taking an event retention left without payload
    # (apply.closed_unapplied): a send's record shows it when the event's message id names it.
    "webhook.event_closed_unapplied": _(
        "The retention period passed before a webhook event could be applied: it was closed "
        "unapplied"
    ),
    "webhook.pod_lost": _(
        "The AgentMail webhook of %(object)s went with the tenant's pod: it is registered again "
        "in the new pod"
    ),
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
    "draft.closed_as_sent": _(
        "%(object)s left review: %(actor)s proved that its earlier send went out"
    ),
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
    "broadcast.approval_undone": _("%(actor)s undid the approval of the broadcast %(object)s"),
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
    "retired": _("earlier signing secrets retired"),
    "email": _("email"),
    "recipients": _("recipients"),
    "unapproved_recipients": _("recipients nobody approved"),
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
    "webhook_event_ids": _("webhook events"),
    "webhook_event_id": _("webhook event"),
    "inbox_id": _("AgentMail inbox"),
    "client_id": _("new AgentMail client id"),
    "old_client_id": _("previous AgentMail client id"),
    "needs_attention": _("sends handed to a person"),
    "attempt": _("attempt"),
    "attempt_committed": _("attempt recorded"),
    "base_version": _("based on version"),
    "broadcast": _("broadcast"),
    "code": _("code"),
    "content_hash": _("content hash"),
    "previous_hash": _("previous content hash"),
    "copied_from_version": _("copied from version"),
    "pending_version": _("version left in review"),
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
    "sla_due_at": _("new deadline"),
    "skipped": _("skipped"),
    "through_position": _("through recipient"),
    "version": _("version"),
    # The sign-in audit's details (tenants.signin_audit).
    "user_agent": _("browser"),
    "ip": _("IP address"),
    "sessions_ended": _("sessions ended"),
    "second_step_back_off_ended": _("the back-off on wrong second-step codes ended"),
    "ip_addresses": _("IP addresses"),
    "method": _("how"),
    "factor": _("second factor"),
    "recovery_codes_left": _("recovery codes left"),
    "failures": _("failed second steps"),
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


# The keys whose values are ISO times: shown in the reader's zone, like every time on the page.
# A deadline (draft.sla_warning, draft.sla_breached, draft.reopened), an undo window's end
# (intent.undone) and a cleared send-by time showed as the stored UTC string.
TIMES = {"expires_at", "due_at", "sla_due_at", "hold_until", "not_after_cleared"}
