from __future__ import annotations

import secrets
from typing import ClassVar

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, BaseUserManager, PermissionsMixin
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from common.addresses import operator_account_address


class UserManager(BaseUserManager["User"]):
    use_in_migrations = True

    def create_user(self, email: str, password: str | None = None, **fields) -> User:
        if not email:
            raise ValueError("A user needs an email address")
        user = self.model(email=self.normalize_email(email).lower(), **fields)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_superuser(self, email: str, password: str | None = None, **fields) -> User:
        # Django's createsuperuser passes the address as typed (its check, ours, took it): stored
        # as every account's is, "root@\uff43ountersign.test" was another account than the
        # root@countersign.test it reads as. Raises ValueError.
        email = operator_account_address(email)
        fields.setdefault("is_staff", True)
        fields.setdefault("is_superuser", True)
        return self.create_user(email, password, **fields)


# django-otp is untyped, so the plugin cannot see TotpDevice's reverse manager on User.
class User(AbstractBaseUser, PermissionsMixin):  # type: ignore[django-manager-missing]
    """A person who signs in with an email address. Global: one person may serve several tenants."""

    email = models.EmailField(unique=True)
    full_name = models.CharField(max_length=150, blank=True)
    is_active = models.BooleanField(default=True)
    is_staff = models.BooleanField(default=False, help_text="May use the operators' Django admin.")
    date_joined = models.DateTimeField(default=timezone.now)
    # Blank: the browser's Accept-Language decides. Otherwise one of settings.LANGUAGES (checked
    # by tenants.preferences, the only writer, so that adding a language needs no migration).
    language = models.CharField(max_length=10, blank=True)
    # Blank: UTC. Otherwise an IANA name from tenants.preferences.time_zone_names().
    time_zone = models.CharField(max_length=64, blank=True)
    # Sign-ins that got the password right and then failed the second step, since the person was
    # last told of them (tenants.signin_alerts, the only writer): the last one's time and address.
    second_step_failures = models.PositiveIntegerField(default=0, db_default=0)
    second_step_failed_at = models.DateTimeField(null=True, blank=True)
    second_step_failed_ip = models.GenericIPAddressField(null=True, blank=True)

    objects = UserManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS: ClassVar[list[str]] = []

    def __str__(self) -> str:
        return self.email

    def clean(self) -> None:
        # Sign-in, invitations and single sign-on compare lower-cased addresses: an operator's
        # "Bob@Acme.test" in the Django admin could never sign in, and an invitation would then
        # make a second, lower-case account. Here, before the form checks uniqueness. Not
        # AbstractBaseUser.clean's NFKC of the whole address: the admin's forms store a new
        # address in the account form (tenants.admin), refusing a look-alike local part that
        # NFKC silently made another person's; and an address left unchanged stays as stored.
        super(AbstractBaseUser, self).clean()
        self.email = (self.email or "").strip().lower()

    def save(self, *args, **kwargs) -> None:
        self.email = (self.email or "").strip().lower()
        super().save(*args, **kwargs)

    @property
    def display_name(self) -> str:
        return self.full_name or self.email


def new_pod_client_id() -> str:
    """The ``client_id`` of a new tenant's pod at AgentMail (see ``Tenant.pod_client_id``)."""
    return f"cs-tenant-{secrets.token_hex(16)}"


class Tenant(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active", _("Active")
        # A suspended tenant is closed: members get a page saying so, agents get 403, nothing sends.
        SUSPENDED = "suspended", _("Suspended")

    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=60, unique=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    agentmail_pod_id = models.CharField(max_length=100, blank=True)
    # The client_id the pod is created with (read through pod_client_id): AgentMail answers a
    # create whose client_id it has seen with the original pod (reference/agentmail-api.md
    # §3.1), so a crashed provisioning repeats safely. Drawn once per row, never derived from
    # the id: every tenant of a deployment shares one AgentMail organization, and a database
    # restored from an older backup, built anew, or of another deployment on that organization
    # hands the same ids out again, so "cs-tenant-<id>" gave a new customer an old one's pod.
    # Null only for a row inserted by a process of the release before this column (a rolling
    # upgrade): it provisioned with the id-derived form, which pod_client_id then repeats.
    agentmail_client_id = models.CharField(
        max_length=100, null=True, blank=True, default=new_pod_client_id, editable=False
    )
    review_deadline_hours = models.PositiveIntegerField(
        default=24, help_text="A pending draft expires this many hours after it was created."
    )
    second_approver_on_edit = models.BooleanField(
        default=False,
        help_text="When the approver edited the draft, another person must approve it.",
    )
    retention_days = models.PositiveIntegerField(
        default=90, help_text="Bodies and webhook payloads are purged after this many days."
    )
    # The organisation's own mail domains (lower-case, no "@"): a recipient outside them is
    # pointed out to the reviewer as external. Empty: nothing is called external.
    own_domains = ArrayField(models.CharField(max_length=253), default=list, blank=True)
    send_hold_seconds = models.PositiveIntegerField(
        default=10,
        help_text="After Approve, the send waits this long so it can be undone (0: no hold).",
    )
    # Deadlines (SLA): the target time from the customer's message to a first decision. Blank
    # means no target; a mailbox may set its own (Mailbox.sla_minutes).
    sla_minutes = models.PositiveIntegerField(null=True, blank=True)
    # The warning window before the target; blank means the last quarter of the target.
    sla_warning_minutes = models.PositiveIntegerField(null=True, blank=True)
    # Escalation of a breached draft: to one named member, or round-robin among a role.
    escalate_to = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    escalate_to_role = models.CharField(max_length=16, blank=True)
    # Members without a second factor (authenticator app or passkey) can only enrol one.
    require_two_factor = models.BooleanField(default=False)
    # The tenant's own attachment storage quota, set by an operator (manage.py
    # tenant_storage_quota, through tenants.onboarding); null: the deployment's
    # TENANT_ATTACHMENT_STORAGE_BYTES. Read through attachment_storage_quota.
    attachment_storage_quota_bytes = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="Attachment bytes this tenant may hold; blank: the deployment's quota.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(sla_minutes__isnull=True) | Q(sla_minutes__gte=1),
                name="tenant_sla_positive",
            ),
            models.CheckConstraint(
                condition=Q(escalate_to__isnull=True) | Q(escalate_to_role=""),
                name="tenant_escalation_one_rule",
            ),
            models.CheckConstraint(
                condition=Q(escalate_to_role__in=["", "admin", "approver"]),
                name="tenant_escalation_role_valid",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["active", "suspended"]), name="tenant_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(retention_days__gte=1), name="tenant_retention_positive"
            ),
            models.CheckConstraint(
                condition=Q(send_hold_seconds__lte=300), name="tenant_send_hold_at_most_300"
            ),
            # The bounds of TENANT_ATTACHMENT_STORAGE_BYTES, as far as they do not depend on a
            # setting (the lower one, one draft's files, is checked by tenants.onboarding).
            models.CheckConstraint(
                condition=Q(attachment_storage_quota_bytes__isnull=True)
                | Q(attachment_storage_quota_bytes__range=(1, 1024**5)),
                name="tenant_storage_quota_in_range",
            ),
            models.UniqueConstraint(
                fields=["agentmail_client_id"], name="tenant_unique_agentmail_client_id"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.ACTIVE

    @property
    def pod_client_id(self) -> str:
        """The AgentMail client_id of the tenant's pod: the same on every provisioning of this
        row, another on any other row, whatever its id."""
        return self.agentmail_client_id or f"cs-tenant-{self.pk}"

    @property
    def attachment_storage_quota(self) -> int:
        """The attachment bytes the tenant may hold (its effective quota): its own, when an
        operator set one, else the deployment's."""
        own = self.attachment_storage_quota_bytes
        return int(settings.TENANT_ATTACHMENT_STORAGE_BYTES) if own is None else own


class Membership(models.Model):
    class Role(models.TextChoices):
        ADMIN = "admin", _("Admin")
        APPROVER = "approver", _("Approver")
        VIEWER = "viewer", _("Viewer")

    # The roles that may approve or reject a draft (with the mailbox right: intents.policy).
    DECIDING_ROLES = frozenset({Role.ADMIN, Role.APPROVER})

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    is_active = models.BooleanField(default=True)
    # Per-mailbox approve rights: admins and approvers approve for every mailbox unless this is
    # False, in which case only for `approve_mailboxes`.
    approve_all_mailboxes = models.BooleanField(default=True)
    approve_mailboxes = models.ManyToManyField(
        "mailboxes.Mailbox", blank=True, related_name="approver_memberships"
    )
    # Away: automatic assignment and escalation skip this member (set by them or an admin).
    is_away = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "tenant"], name="membership_unique_user_tenant"
            ),
            models.CheckConstraint(
                condition=Q(role__in=["admin", "approver", "viewer"]), name="membership_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant} ({self.role})"

    @property
    def is_admin(self) -> bool:
        return self.role == self.Role.ADMIN


class Invitation(models.Model):
    """An offer of a membership, made by an admin and taken up by an explicit act of the invitee.

    Nothing exists in the tenant until acceptance: the membership (and, for an address without an
    account, the account) is created then. The link's secret is stored only as a SHA-256 digest;
    the admin sees the plaintext once. "Expired" is not a state: a pending invitation past
    ``expires_at`` (database clock) is expired.
    """

    class State(models.TextChoices):
        PENDING = "pending", _("Pending")
        ACCEPTED = "accepted", _("Accepted")
        DECLINED = "declined", _("Declined")
        REVOKED = "revoked", _("Revoked")

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    full_name = models.CharField(max_length=150, blank=True)
    role = models.CharField(max_length=16, choices=Membership.Role.choices)
    # The rights the membership will carry, with Membership's meaning.
    approve_all_mailboxes = models.BooleanField(default=True)
    approve_mailboxes = models.ManyToManyField("mailboxes.Mailbox", blank=True, related_name="+")
    digest = models.CharField(max_length=64, unique=True)
    invited_by = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The platform's offer, made by an operator (tenants.onboarding), who is nobody in the tenant:
    # no admin's role backs it. A flag, not "no inviter": ``invited_by`` also empties when the
    # inviting admin's account is deleted, and that must not make their link work again.
    by_operator = models.BooleanField(default=False, db_default=False)
    created_at = models.DateTimeField(db_default=Now())
    expires_at = models.DateTimeField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["pending", "accepted", "declined", "revoked"]),
                name="invitation_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(role__in=["admin", "approver", "viewer"]), name="invitation_role_valid"
            ),
            models.CheckConstraint(
                condition=Q(state="pending", closed_at__isnull=True)
                | (~Q(state="pending") & Q(closed_at__isnull=False)),
                name="invitation_closed_iff_not_pending",
            ),
            models.CheckConstraint(
                condition=Q(by_operator=False) | Q(invited_by__isnull=True),
                name="invitation_operator_has_no_inviter",
            ),
            # One live link per address and tenant: inviting again replaces the old one.
            models.UniqueConstraint(
                fields=["tenant", "email"],
                condition=Q(state="pending"),
                name="invitation_one_pending_per_email",
            ),
        ]
        indexes = [models.Index(fields=["tenant", "-created_at"], name="invitation_tenant_recent")]

    def __str__(self) -> str:
        return f"{self.email} @ {self.tenant} ({self.state})"


class AgentToken(models.Model):
    """A bearer token for an AI agent. Only a SHA-256 digest of the secret is stored."""

    class Scope(models.TextChoices):
        DRAFTS_WRITE = "drafts:write", _("Create and revise drafts")
        DRAFTS_READ = "drafts:read", _("Read drafts and their status")

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="agent_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    scopes = ArrayField(models.CharField(max_length=32), default=list)
    # Every mailbox of the tenant, those connected later too; otherwise only ``mailboxes``. An
    # explicit flag, not "an empty set means all": a token whose set somehow ended up empty must
    # reach nothing, never everything.
    all_mailboxes = models.BooleanField(default=False)
    mailboxes = models.ManyToManyField("mailboxes.Mailbox", blank=True, related_name="agent_tokens")
    created_by = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "name"], name="agenttoken_unique_name_per_tenant"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (cs_{self.prefix}…)"

    def mailbox_scope(self) -> set[int] | None:
        """The ids of the mailboxes this token may use, or None for every mailbox of its tenant."""
        if self.all_mailboxes:
            return None
        return set(self.mailboxes.values_list("pk", flat=True))


class AuditEventQuerySet(models.QuerySet["AuditEvent"]):
    def bulk_create(self, objs, *args, **kwargs):
        # bulk_create skips save(): the rows take their actor's address here instead.
        objs = list(objs)
        for obj in objs:
            obj.take_actor_label()
        return super().bulk_create(objs, *args, **kwargs)


class AuditEvent(models.Model):
    """Append-only record of administrative and security actions (members, tokens, mailboxes,
    policy, sign-in). Draft and intent transitions are journaled in intents.IntentEvent."""

    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    actor = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The actor's address when they acted: the log names who did it as they were then, after
    # they (or an operator) change the address, and after the user row is gone. Filled on every
    # write (save() and bulk_create), so no writer can forget it.
    actor_label = models.CharField(max_length=254, blank=True, default="", db_default="")
    action = models.CharField(max_length=64)
    object_type = models.CharField(max_length=64, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    data = models.JSONField(default=dict, blank=True)
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now(), db_index=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["tenant", "-created_at"], name="auditevent_tenant_recent")]

    def __str__(self) -> str:
        return f"{self.action} {self.object_type}:{self.object_id}"

    def save(self, *args, **kwargs) -> None:
        # Not a side effect: the row's own column, derived from its actor before it is written.
        self.take_actor_label()
        super().save(*args, **kwargs)

    def take_actor_label(self) -> None:
        if self.actor is not None and not self.actor_label:
            self.actor_label = self.actor.email


class FormReceipt(models.Model):
    """What one admin form that shows a secret once created (tenants.once_forms): the form's
    one-time id, posted in a hidden field, and the row it made. A second post of the same form
    (a second click while the first answer is on its way) finds it and is told what the first
    one did, never the secret."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    form_id = models.CharField(max_length=64)
    action = models.CharField(max_length=64)
    object_id = models.CharField(max_length=64, blank=True)
    actor = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "form_id"], name="formreceipt_once_per_tenant"
            )
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.object_id}"


# Sign-in models (second factors, passkeys, single sign-on, sessions) live in their own module.
from tenants.models_signin import (  # noqa: E402
    Passkey,
    RecoveryCode,
    SingleSignOn,
    SsoIdentity,
    TotpDevice,
    UserSession,
)

__all__ = [
    "AgentToken",
    "AuditEvent",
    "FormReceipt",
    "Invitation",
    "Membership",
    "Passkey",
    "RecoveryCode",
    "SingleSignOn",
    "SsoIdentity",
    "Tenant",
    "TotpDevice",
    "User",
    "UserSession",
]
