"""CSRF on every state-changing staff route: a signed-in admin's POST without the token is refused
and writes nothing."""

import pytest
from django.test import Client
from django.urls import reverse

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


def test_a_refused_token_is_a_page_that_says_to_reload_in_the_persons_language(tenant_a, member_of):
    """Django's own CSRF page (English, unstyled, no marker) became the page's alert's generic
    'you may no longer have the right': a page loaded before signing in again is only stale."""
    client = Client(enforce_csrf_checks=True, headers={"Accept-Language": "de"})
    client.force_login(member_of(tenant_a, "approver").user)
    refused = client.post(reverse("preferences"), {"language": "de"})
    page = refused.content.decode()
    assert refused.status_code == 403
    assert "<p data-error-message>" in page and "Laden Sie die Seite neu" in page
