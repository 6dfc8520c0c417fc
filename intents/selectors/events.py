"""Reads of agent event endpoints and their deliveries for the admin page; tenant-scoped, so
another tenant's id is the same None as a missing one."""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from intents.models import AgentEventDelivery, AgentEventEndpoint

RECENT_DELIVERIES = 50


def event_endpoints(tenant) -> QuerySet[AgentEventEndpoint]:
    return (
        AgentEventEndpoint.objects.filter(tenant=tenant)
        .select_related("mailbox", "created_by")
        .annotate(
            waiting=Count("deliveries", filter=Q(deliveries__status__in=["pending", "sending"])),
            failed=Count("deliveries", filter=Q(deliveries__status="failed")),
        )
        .order_by("id")
    )


def event_endpoint(tenant, endpoint_id) -> AgentEventEndpoint | None:
    try:
        pk = int(endpoint_id)
    except (TypeError, ValueError):
        return None
    return AgentEventEndpoint.objects.filter(tenant=tenant, pk=pk).first()


def recent_deliveries(tenant, *, limit: int = RECENT_DELIVERIES) -> list[AgentEventDelivery]:
    return list(
        AgentEventDelivery.objects.filter(tenant=tenant)
        .select_related("event", "endpoint")
        .order_by("-id")[:limit]
    )
