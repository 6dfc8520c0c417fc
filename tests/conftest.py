from __future__ import annotations

import pytest

from tests.factories import PASSWORD, MembershipFactory, TenantFactory


@pytest.fixture
def tenant_a(db):
    return TenantFactory(name="Tenant A", slug="tenant-a")


@pytest.fixture
def tenant_b(db):
    return TenantFactory(name="Tenant B", slug="tenant-b")


@pytest.fixture
def member_of(db):
    """member_of(tenant, role) -> Membership with a fresh user."""

    def make(tenant, role="approver", **kwargs):
        return MembershipFactory(tenant=tenant, role=role, **kwargs)

    return make


@pytest.fixture
def signed_in(client):
    """signed_in(user) -> a test client with that user's session."""

    def sign_in(user):
        client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
        return client

    return sign_in


@pytest.fixture
def password():
    return PASSWORD
