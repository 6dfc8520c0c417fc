"""CSRF on every state-changing staff route: a signed-in admin's POST without the token is refused
and writes nothing."""

import pytest
from django.test import Client

from intents.models import IntentEvent
from tenants.models import AuditEvent
from tests.ui.test_access_walk import fill, tenant_patterns, world  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db


def test_every_state_changing_staff_route_refuses_a_post_without_csrf_token(world):  # noqa: F811 - the imported fixture
    client = Client(enforce_csrf_checks=True)
    client.force_login(world["roles"]["admin"].user)
    journal_before = (IntentEvent.objects.count(), AuditEvent.objects.count())
    statuses = {}
    for name, route in tenant_patterns():
        statuses[name] = client.post(fill(route, world["values"]), {"reason": "x"}).status_code
    assert statuses == {name: 403 for name, _ in tenant_patterns()}
    assert (IntentEvent.objects.count(), AuditEvent.objects.count()) == journal_before


def test_every_account_post_refuses_a_post_without_csrf_token(tenant_a, member_of):
    from tests.ui.test_access_walk import signin_patterns

    client = Client(enforce_csrf_checks=True)
    client.force_login(member_of(tenant_a, "approver").user)
    audit_before = AuditEvent.objects.count()
    values = {"slug": tenant_a.slug, "passkey_id": 1, "session_id": 1}
    statuses = {
        name: client.post(fill(route, values), {"code": "123456"}).status_code
        for name, route in signin_patterns()
        if name not in {"sso_choose", "sso_callback", "sso_start"}
    }
    assert set(statuses.values()) == {403}, statuses
    assert AuditEvent.objects.count() == audit_before
