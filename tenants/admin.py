from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin

from tenants.models import AgentToken, AuditEvent, Invitation, Membership, Tenant, User


@admin.register(User)
class UserAdmin(BaseUserAdmin):
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


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]
    filter_horizontal = ["approve_mailboxes"]


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "status", "agentmail_pod_id", "created_at"]
    list_filter = ["status"]
    search_fields = ["name", "slug"]
    inlines = [MembershipInline]


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    # The digest is never shown: it is useless to a reader and invites copying.
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
    readonly_fields = ["prefix", "created_at", "last_used_at"]

    # Read-only for operators: a token made here had no secret (an empty prefix and digest; the
    # second one was a 500), and an edit here (a scope, un-revoking) left no audit row. Tokens are
    # made and revoked in the console, through tenants.tokens.
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    # Read-only for operators: every change goes through tenants.invitations (and its audit row).
    list_display = ["email", "tenant", "role", "state", "created_at", "expires_at", "closed_at"]
    list_filter = ["state", "tenant"]
    search_fields = ["email"]
    exclude = ["digest"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "tenant", "actor", "action", "object_type", "object_id"]
    list_filter = ["action", "tenant"]

    # The audit trail is written by the services only: an operator adding a row here could
    # forge one.
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
