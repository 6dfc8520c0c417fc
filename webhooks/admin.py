"""Operators' view of the ledger. Read-only: every write goes through webhooks.services (receive,
apply, retention), and a sealed secret is never displayed."""

from django.contrib import admin

from webhooks.models import InboundMessage, RecipientDelivery, WebhookEndpoint, WebhookEvent


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ReadOnlyAdmin):
    list_display = ["public_id", "tenant", "status", "provider_webhook_id", "last_event_at"]
    list_filter = ["status"]
    fields = readonly_fields = (
        "tenant",
        "public_id",
        "status",
        "provider_webhook_id",
        "last_event_at",
        "created_at",
    )


@admin.register(WebhookEvent)
class WebhookEventAdmin(ReadOnlyAdmin):
    list_display = ["received_at", "tenant", "event_type", "state", "svix_id", "message_id"]
    list_filter = ["state", "event_type"]
    search_fields = ["svix_id", "event_id", "message_id"]
    list_select_related = ["tenant"]
    date_hierarchy = "received_at"


@admin.register(RecipientDelivery)
class RecipientDeliveryAdmin(ReadOnlyAdmin):
    list_display = ["intent", "address", "state", "updated_at"]
    list_filter = ["state"]
    search_fields = ["address"]
    raw_id_fields = ["intent", "last_event"]


@admin.register(InboundMessage)
class InboundMessageAdmin(ReadOnlyAdmin):
    list_display = ["received_at", "tenant", "mailbox", "sender", "subject"]
    search_fields = ["message_id", "thread_id", "sender"]
    list_select_related = ["tenant", "mailbox"]
