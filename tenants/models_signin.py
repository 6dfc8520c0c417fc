"""Sign-in beyond the password: second factors, passkeys, single sign-on per tenant, sessions.

Imported by tenants.models, so Django registers these models in the tenants app. The secrets here
are never stored in the clear: the TOTP seed and the OIDC client secret are sealed with
mailboxes.crypto (AES-GCM bound to their row), recovery codes are kept as SHA-256 digests.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy
from django_otp.models import Device, ThrottlingMixin


class TotpDevice(ThrottlingMixin, Device):
    """An authenticator app (RFC 6238, 30-second steps, 6 digits), django-otp's device with the
    seed sealed instead of stored as hex. ``last_t`` is the step of the last code accepted: a code
    is good once, and only a later step is accepted after it."""

    user = models.ForeignKey("tenants.User", on_delete=models.CASCADE, related_name="totp_devices")
    sealed_key = models.TextField()
    last_t = models.BigIntegerField(default=-1)
    drift = models.SmallIntegerField(default=0)
    created_at = models.DateTimeField(db_default=Now())
    last_used_at = models.DateTimeField(null=True, blank=True)
    # Wrong recovery codes in a row, and when the last one came: their own back-off
    # (tenants.two_factor), apart from django-otp's on the 6 digits above.
    recovery_failure_count = models.PositiveIntegerField(default=0, db_default=0)
    recovery_failed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # One authenticator per person: enrolling again replaces the unconfirmed one.
            models.UniqueConstraint(fields=["user"], name="totpdevice_one_per_user"),
        ]

    def get_throttle_factor(self) -> int:
        from django.conf import settings

        return int(getattr(settings, "OTP_TOTP_THROTTLE_FACTOR", 1))


class RecoveryCode(models.Model):
    """One single-use recovery code: only its SHA-256 digest; used once, then ``used_at``."""

    user = models.ForeignKey(
        "tenants.User", on_delete=models.CASCADE, related_name="recovery_codes"
    )
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(db_default=Now())
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "digest"], name="recoverycode_unique_digest"),
        ]

    def __str__(self) -> str:
        return f"recovery code of user {self.user_id}"


class Passkey(models.Model):
    """A WebAuthn credential (a passkey): the public key and the signature counter the
    authenticator last reported (a counter that goes backwards means a cloned authenticator)."""

    user = models.ForeignKey("tenants.User", on_delete=models.CASCADE, related_name="passkeys")
    name = models.CharField(max_length=64)
    credential_id = models.BinaryField(unique=True)
    public_key = models.BinaryField()
    sign_count = models.BigIntegerField(default=0)
    transports = ArrayField(models.CharField(max_length=16), default=list, blank=True)
    created_at = models.DateTimeField(db_default=Now())
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.name


class SingleSignOn(models.Model):
    """A tenant's OpenID Connect identity provider (authorization code flow with PKCE)."""

    tenant = models.OneToOneField(
        "tenants.Tenant", on_delete=models.CASCADE, related_name="single_sign_on"
    )
    enabled = models.BooleanField(default=False)
    issuer = models.URLField(max_length=300)
    client_id = models.CharField(max_length=200)
    sealed_client_secret = models.TextField()
    # False: members of this tenant must come through the identity provider to open it.
    password_signin_allowed = models.BooleanField(default=True)
    # Just-in-time accounts: only for addresses in these domains, only with this role.
    jit_domains = ArrayField(models.CharField(max_length=253), default=list, blank=True)
    jit_role = models.CharField(max_length=16, blank=True)
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(jit_role__in=["", "approver", "viewer", "admin"]),
                name="singlesignon_jit_role_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.issuer} for tenant {self.tenant_id}"


class SsoIdentity(models.Model):
    """The link from an identity provider's subject to an account, per tenant and issuer."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    issuer = models.CharField(max_length=300)
    subject = models.CharField(max_length=255)
    user = models.ForeignKey("tenants.User", on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(db_default=Now())
    last_signin_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "issuer", "subject"], name="ssoidentity_unique_subject"
            ),
            models.UniqueConstraint(fields=["tenant", "user"], name="ssoidentity_one_per_member"),
        ]

    def __str__(self) -> str:
        return f"{self.issuer} {self.subject}"


class UserSession(models.Model):
    """What a person sees of one of their signed-in sessions; the session itself is Django's
    (database backend), keyed by the same session key, and ending one deletes both."""

    session_key = models.CharField(max_length=40, unique=True)
    user = models.ForeignKey("tenants.User", on_delete=models.CASCADE, related_name="sessions")
    user_agent = models.CharField(max_length=300, blank=True)
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    method = models.CharField(max_length=16)
    created_at = models.DateTimeField(db_default=Now())
    last_seen_at = models.DateTimeField(db_default=Now())

    # How a session signed in, as the sessions page names it (no choices on the field: the values
    # are ours, written by tenants.user_sessions, and a label change needs no migration).
    METHOD_LABELS = {
        "password": gettext_lazy("a password"),
        "passkey": gettext_lazy("a passkey"),
        "sso": gettext_lazy("single sign-on"),
    }

    class Meta:
        indexes = [models.Index(fields=["user", "-last_seen_at"], name="usersession_user_recent")]

    def __str__(self) -> str:
        return f"session of user {self.user_id} ({self.method})"

    @property
    def method_label(self) -> str:
        return str(self.METHOD_LABELS.get(self.method, self.method))
