"""Operators' view of the ledger. Read-only: every write goes through webhooks.services (receive,
apply, retention), and a sealed secret is never displayed.

Nor is customer mail: an operator sees who wrote to which mailbox, when, under which ids, and what
became of each event and recipient, never a subject, a preview or a stored payload (which holds
both), and cannot search by them. Reading a message is the tenant's reviewers' job, in the review
pages; an operator who browsed every tenant's mail here left no record of it."""

from django.contrib import admin

from common import admin as common_admin
from common.admin import UnfilterableFieldsAdmin
from webhooks.models import InboundMessage, RecipientDelivery, WebhookEndpoint, WebhookEvent


class ReadOnlyAdmin(common_admin.ReadOnlyAdmin, UnfilterableFieldsAdmin):
    """Webhook rows are written by the receiver and the applier only."""


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
    exclude = ["payload"]
    unfilterable = frozenset({"payload"})


@admin.register(RecipientDelivery)
class RecipientDeliveryAdmin(ReadOnlyAdmin):
    list_display = ["intent", "address", "state", "updated_at"]
    list_filter = ["state"]
    search_fields = ["address"]
    raw_id_fields = ["intent", "last_event"]


@admin.register(InboundMessage)
class InboundMessageAdmin(ReadOnlyAdmin):
    list_display = ["received_at", "tenant", "mailbox", "sender", "message_id"]
    search_fields = ["message_id", "thread_id", "sender"]
    list_select_related = ["tenant", "mailbox"]
    exclude = ["subject", "preview"]
    unfilterable = frozenset({"subject", "preview"})
