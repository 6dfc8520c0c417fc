from collections.abc import Callable
from datetime import datetime
from functools import partial

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import unquote
from django.contrib.auth.admin import GroupAdmin
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator
from django.db import transaction
from django.db.models import QuerySet
from django.template.defaultfilters import filesizeformat
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from common.addresses import operator_account_address
from common.admin import ReadOnlyAdmin, UnfilterableFieldsAdmin
from tenants import onboarding, operator_groups
from tenants.models import AgentToken, AuditEvent, Invitation, Membership, Tenant, User
from tenants.passwords import operator_password_recorded
from tenants.send_stops import Stopped, sends_in_flight_hold, with_sends_in_flight
from tenants.services import AdminError
from tenants.user_sessions import sessions_end_all


def _names(tenants: list[Tenant]) -> str:
    return ", ".join(f"{t.name} ({t.slug})" for t in tenants)


class AccountAddressMixin:
    """An address added or changed here is stored in the form every account's is
    (``common.addresses.operator_account_address``): "bob@\uff41cme.test" is Bob's own address,
    found taken, and a local part that could pass for another is refused naming why, as an
    invitation is, rather than as Django's validator's "Enter a valid email address.", which
    ran first (it refuses every local part beyond ASCII). An address left as it was stays as it
    is: a look-alike kept apart by tenants.0016 can still be switched off here."""

    fields: dict[str, forms.Field]
    cleaned_data: dict
    instance: User

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if field := self.fields.get("email"):
            field.validators = [v for v in field.validators if not isinstance(v, EmailValidator)]

    def clean_email(self) -> str:
        email = self.cleaned_data["email"]
        if self.instance.pk and email.strip().lower() == self.instance.email:
            return self.instance.email
        try:
            return operator_account_address(email)
        except ValueError as error:
            raise ValidationError(str(error), code="invalid") from None


class AccountCreationForm(AccountAddressMixin, AdminUserCreationForm):
    pass


class AccountChangeForm(AccountAddressMixin, UserChangeForm):
    """Switching off the account of a tenant's last active admin is asked about, not refused.

    A tenant's own admins cannot leave it without one (tenants.services), but an operator may
    have to: the account of a compromised admin must stop now, whether or not anyone else there
    is an admin yet, and a tenant without an admin loses nothing but its management until an
    operator invites a new one (``tenant_invite_admin``). Refusing would leave the operator to
    wait, or to get round the refusal by promoting someone in the tenant's place. So the first
    save names the tenants it would leave without an admin and changes nothing; the save that
    ticks the box goes through, with a warning and an audit row in each of those tenants. The
    check runs under the lock of those tenants' admin memberships (``lock=True``): of two
    operators switching off a tenant's two admins at once, the second is asked."""

    leave_tenants_without_admin = forms.BooleanField(
        required=False,
        label=gettext_lazy("Leave tenants without an admin"),
        help_text=gettext_lazy(
            "This person is the only active admin of a tenant. Tick to switch the account "
            "off all the same, for example to lock out a compromised account; an operator "
            "then invites a new admin."
        ),
    )

    def clean(self):
        cleaned = super().clean()
        self.left_without_admin: list[Tenant] = []
        if self.instance.pk and "is_active" in self.changed_data and not cleaned.get("is_active"):
            self.left_without_admin = onboarding.tenants_left_without_admin(
                user=self.instance, lock=True
            )
            if self.left_without_admin and not cleaned.get("leave_tenants_without_admin"):
                raise ValidationError(
                    _(
                        "Switching this account off leaves %(tenants)s without an active admin: "
                        "nobody there could manage members, mailboxes or policies until an "
                        "operator invites a new admin. To switch it off all the same, tick "
                        "“Leave tenants without an admin” and save again."
                    )
                    % {"tenants": _names(self.left_without_admin)},
                    code="last_admin",
                )
        return cleaned


def _after_is_active(fields) -> list:
    fields = list(fields)
    at = fields.index("is_active") + 1 if "is_active" in fields else len(fields)
    return [*fields[:at], "leave_tenants_without_admin", *fields[at:]]


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    form = AccountChangeForm
    add_form = AccountCreationForm
    ordering = ["email"]
    list_display = ["email", "full_name", "is_active", "is_staff", "date_joined"]
    search_fields = ["email", "full_name"]
    list_filter = ["is_active", "is_staff"]
    fieldsets = [
        (None, {"fields": ["email", "password"]}),
        ("Person", {"fields": ["full_name"]}),
        (
            "Access",
            {"fields": ["is_active", "is_staff", "is_superuser", "groups", "user_permissions"]},
        ),
        ("Dates", {"fields": ["last_login", "date_joined"]}),
    ]
    add_fieldsets = [(None, {"classes": ["wide"], "fields": ["email", "password1", "password2"]})]

    # Every edit here is in the audit log of each tenant of the person (an address, whether they
    # may sign in, a password chosen by someone else: a tenant's admins must be able to see it),
    # and nobody is deleted: the journals name people for good (a deletion of anyone who ever
    # acted failed on them with a 500; of anyone else it silently took their memberships with
    # it). An account that must stop is made inactive.
    def has_delete_permission(self, request, obj=None):
        return False

    # Who may use this admin and with which rights is a superuser's decision. A staff member who
    # may change accounts made themselves superuser here (or gave a friend every permission), and
    # set a superuser's password to sign in as one.
    ACCESS_FIELDS = ("is_staff", "is_superuser", "groups", "user_permissions")

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        if request.user.is_superuser:
            return fields
        return fields + self.ACCESS_FIELDS

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or not onboarding.tenants_left_without_admin(user=obj):
            return fieldsets
        # Right after "is active", which it answers for (the question is asked above the form).
        return [
            (name, {**options, "fields": _after_is_active(options["fields"])})
            if name == "Access"
            else (name, options)
            for name, options in fieldsets
        ]

    def has_change_permission(self, request, obj=None):
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_change_permission(request, obj)

    def save_model(self, request, obj, form, change):
        in_flight = sessions_ended = None
        if change and "is_active" in form.changed_data and not obj.is_active:
            # An account switched off stops every send the person approved, as a member's
            # deactivation does: first hold those on their way, tenant by tenant (the admin's
            # change view is one transaction), and count those already past their last check.
            tenants = sorted(
                Membership.objects.filter(user=obj, is_active=True).values_list(
                    "tenant_id", flat=True
                )
            )
            in_flight = sum(sends_in_flight_hold(tenant_id=t, approver_id=obj.pk) for t in tenants)
            # Switched off is signed out for good: its sessions were kept, only unusable while it
            # was off, and switching it on again let every one of them (the stolen cookie the
            # switch-off was for) back in, past the second factor each had proven.
            sessions_ended = sessions_end_all(user=obj)
        super().save_model(request, obj, form, change)
        if left := getattr(form, "left_without_admin", []):
            onboarding.tenants_left_without_admin_record(user=obj, tenants=left, actor=request.user)
            messages.warning(
                request,
                _(
                    "These tenants have no active admin now: %(tenants)s. Invite one with "
                    "“manage.py tenant_invite_admin <slug> --email <address>”."
                )
                % {"tenants": _names(left)},
            )
        if not change:
            onboarding.operator_account_created(user=obj, actor=request.user)
        changed = [name for name in form.changed_data if name != "password"]
        if change and changed:
            onboarding.account_changed_by_operator(
                user=obj,
                actor=request.user,
                request=request,
                before={name: _plain(form.initial.get(name)) for name in changed},
                after={name: _plain(form.cleaned_data.get(name)) for name in changed},
                sends_in_flight=in_flight,
                sessions_ended=sessions_ended,
            )

    def user_change_password(self, request, id, form_url=""):
        if request.method != "POST":
            return super().user_change_password(request, id, form_url)
        with transaction.atomic():
            user = self.get_object(request, unquote(id))
            before = user.password if user is not None else None
            response = super().user_change_password(request, id, form_url)
            if user is not None:
                user.refresh_from_db(fields=["password"])
                if user.password != before:
                    operator_password_recorded(user=user, actor=request.user, request=request)
        return response


def _plain(value):
    """A form value as the audit row keeps it (JSON): related rows by name, times as ISO text."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, QuerySet | list | tuple):
        return sorted(str(item) for item in value)
    return value


admin.site.unregister(Group)


@admin.register(Group)
class SuperuserOnlyGroupAdmin(GroupAdmin):
    """Groups carry permissions: a staff member who may change a group they belong to could give
    it every permission, their own "make me a superuser" by another road. Only a superuser adds,
    changes or deletes one; staff with the permission may look. Each add, change and deletion
    leaves an audit row naming the permissions given or taken (tenants.operator_groups)."""

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser

    def get_object(self, request, object_id, from_field=None):
        # A change or deletion (a POST, inside the admin's transaction) locks the group as it is
        # read: the form's initial values are then what the change starts from, and the audit
        # row's "removed" is not a concurrent change's.
        found = super().get_object(request, object_id, from_field)
        if found is None or request.method != "POST":
            return found
        return self.get_queryset(request).select_for_update().filter(pk=found.pk).first()

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        if change:
            operator_groups.group_changed_recorded(
                group=form.instance,
                actor=request.user,
                before_name=form.initial.get("name", ""),
                before=form.initial.get("permissions", []),
            )
        else:
            operator_groups.group_created_recorded(group=form.instance, actor=request.user)

    def delete_model(self, request, obj):
        operator_groups.group_deleted_recorded(group=obj, actor=request.user)
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        # "Delete selected groups": not in a transaction of the admin's own.
        with transaction.atomic():
            for group in queryset.select_for_update().order_by("pk"):
                operator_groups.group_deleted_recorded(group=group, actor=request.user)
            super().delete_queryset(request, queryset)


class MembershipInline(ReadOnlyAdmin, admin.TabularInline):
    # Read-only, as the tenant: roles and approve rights change in the tenant's console, through
    # tenants.services (the last-admin rule, this tenant's mailboxes only, an audit row).
    model = Membership
    extra = 0
    fields = readonly_fields = (
        "user",
        "role",
        "is_active",
        "approve_all_mailboxes",
        "approve_mailboxes",
        "is_away",
    )


class SuspendForm(forms.Form):
    reason = forms.CharField(
        label=gettext_lazy("Reason"),
        max_length=onboarding.REASON_MAX,
        help_text=gettext_lazy("The tenant's admins read it in their audit log."),
        widget=forms.TextInput(attrs={"size": 80}),
        error_messages={"required": gettext_lazy("Say why the tenant is suspended.")},
    )

    def clean_reason(self) -> str:
        try:
            return onboarding.suspension_reason_checked(self.cleaned_data["reason"])
        except AdminError as error:
            raise forms.ValidationError(error.message, code=error.code) from None


@admin.register(Tenant)
class TenantAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    """Read-only for operators: a tenant is created, suspended and resumed through
    tenants.onboarding (the commands, or the actions here), which check what they write and leave
    an audit row the tenant's admins read; an edit here did neither."""

    list_display = ["name", "slug", "status", "agentmail_pod_id", "storage_quota", "created_at"]
    list_filter = ["status"]
    search_fields = ["name", "slug"]
    inlines = [MembershipInline]
    actions = ["suspend", "resume"]
    # The effective quota in its place (``manage.py tenant_storage_quota`` changes it).
    exclude = ["attachment_storage_quota_bytes"]
    readonly_fields = ["storage_quota"]

    @admin.display(description=gettext_lazy("Attachment storage quota"))
    def storage_quota(self, tenant: Tenant) -> str:
        quota = tenant.attachment_storage_quota
        if tenant.attachment_storage_quota_bytes is None:
            words = _("%(bytes)d bytes (%(size)s, the deployment's quota)")
        else:
            words = _("%(bytes)d bytes (%(size)s, its own quota)")
        return words % {"bytes": quota, "size": filesizeformat(quota)}

    def has_status_permission(self, request) -> bool:
        """Who may suspend and resume: an operator who could change a tenant in the admin."""
        return request.user.has_perm("tenants.change_tenant")

    @admin.action(description=gettext_lazy("Suspend the selected tenants"), permissions=["status"])
    def suspend(self, request, queryset):
        form = SuspendForm(request.POST if "confirm" in request.POST else None)
        if not form.is_valid():
            return TemplateResponse(
                request,
                "admin/tenants/tenant/suspend.html",
                {
                    **self.admin_site.each_context(request),
                    "title": _("Suspend tenants"),
                    "opts": self.model._meta,
                    "tenants": queryset.order_by("slug"),
                    "form": form,
                    "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                },
            )
        suspend = partial(
            onboarding.tenant_suspend, reason=form.cleaned_data["reason"], actor=request.user
        )
        self._each(request, queryset, suspend, _("%(tenant)s (%(slug)s) is suspended."))
        return None

    @admin.action(description=gettext_lazy("Resume the selected tenants"), permissions=["status"])
    def resume(self, request, queryset):
        resume = partial(onboarding.tenant_resume, actor=request.user)
        self._each(request, queryset, resume, _("%(tenant)s (%(slug)s) is active again."))

    def _each(
        self, request, queryset, change: Callable[..., Tenant | Stopped[Tenant]], done: str
    ) -> None:
        """``change`` each selected tenant (each in its own transaction), reporting per tenant
        what happened, and the sends a suspension found already on their way."""
        for slug in queryset.order_by("slug").values_list("slug", flat=True):
            try:
                result = change(slug=slug)
            except AdminError as error:
                self.message_user(request, error.message, messages.WARNING)
            else:
                stopped = result if isinstance(result, Stopped) else Stopped(result)
                tenant = stopped.changed
                said = done % {"tenant": tenant.name, "slug": tenant.slug}
                self.message_user(
                    request, with_sends_in_flight(said, stopped, "tenant"), messages.SUCCESS
                )


@admin.register(AgentToken)
class AgentTokenAdmin(ReadOnlyAdmin, UnfilterableFieldsAdmin):
    # The digest is never shown: it is useless to a reader and invites copying. Nor can it be
    # filtered on (``?digest__startswith=``): the count of results read it out a character at a time.
    list_display = [
        "name",
        "tenant",
        "prefix",
        "scopes",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    ]
    list_filter = ["tenant"]
    exclude = ["digest"]
    unfilterable = frozenset({"digest"})
    readonly_fields = ["prefix", "created_at", "last_used_at"]

    # Read-only for operators (ReadOnlyAdmin): a token made here had no secret (an empty prefix
    # and digest; the second one was a 500), and an edit here (a scope, un-revoking) left no audit
    # row. Tokens are made and revoked in the console, through tenants.tokens. Nor deleted: the
    # drafts and the journal name the token that wrote them (a used token's deletion failed on
    # the journal with a 500; an unused one's vanished without an audit row). Revoking is the way
    # to stop one.


@admin.register(Invitation)
class InvitationAdmin(ReadOnlyAdmin, UnfilterableFieldsAdmin):
    # Read-only for operators: every change goes through tenants.invitations (and its audit row).
    # The link's digest is neither shown nor filterable, as a token's.
    list_display = [
        "email",
        "tenant",
        "role",
        "state",
        "by_operator",
        "created_at",
        "expires_at",
        "closed_at",
    ]
    list_filter = ["state", "tenant"]
    search_fields = ["email"]
    exclude = ["digest"]
    unfilterable = frozenset({"digest"})

    # Read-only (ReadOnlyAdmin), nor deleted: a pending invitation deleted here was withdrawn with
    # no audit row (revoking it on the members page records who did), and a closed one is the
    # record of how a member came.


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = ["created_at", "tenant", "actor_label", "action", "object_type", "object_id"]
    list_filter = ["action", "tenant"]

    # The audit trail is written by the services only (ReadOnlyAdmin): an operator adding a row
    # here could forge one.
