"""Console → Agent events: a loopback literal is refused as loopback."""

from __future__ import annotations

import pytest

from intents.models import AgentEventEndpoint

BASE = "/t/tenant-a/admin/agent-events/"


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["https://[::1]/hooks", "https://127.0.0.1/hooks"])
def test_a_loopback_literal_in_production_is_refused_as_loopback(
    tenant_a, member_of, signed_in, settings, url
):
    settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS = False
    client = signed_in(member_of(tenant_a, "admin").user)

    response = client.post(f"{BASE}new/", {"url": url, "event_types": ["draft.approved"]})

    assert response.status_code == 422
    assert "is a loopback address" in response.content.decode()
    assert AgentEventEndpoint.objects.count() == 0
