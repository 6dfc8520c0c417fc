"""Key rotation covers agent event endpoints: after ``reencrypt_secrets`` and dropping the old key
(DEPLOYMENT.md "Rotating secrets"), each endpoint's signing secret, and the previous one still
signing during its rotation's grace, open and sign as before."""

import importlib
import io

import pytest
from django.apps import apps
from django.core.management import call_command

from common import crypto
from config.clock import db_now
from intents.models_events import AgentEventEndpoint
from intents.services.event_endpoints import endpoint_create, endpoint_rotate_secret

pytestmark = pytest.mark.django_db


def test_rotation_reseals_the_current_and_the_previous_signing_secret(
    tenant_a, member_of, settings
):
    admin = member_of(tenant_a, "admin").user
    endpoint, first = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.rejected"], actor=admin
    )
    endpoint, second = endpoint_rotate_secret(tenant=tenant_a, endpoint_id=endpoint.pk, actor=admin)
    settings.SECRET_ENCRYPTION_KEYS = [crypto.generate_key("k2"), *settings.SECRET_ENCRYPTION_KEYS]

    out = io.StringIO()
    call_command("reencrypt_secrets", stdout=out)
    settings.SECRET_ENCRYPTION_KEYS = settings.SECRET_ENCRYPTION_KEYS[:1]

    endpoint.refresh_from_db()
    assert "the signing secrets of 1 agent event endpoints" in out.getvalue()
    assert {crypto.key_id_of(endpoint.secret_sealed)} == {"k2"}
    assert {crypto.key_id_of(endpoint.previous_secret_sealed)} == {"k2"}
    assert endpoint.secrets(db_now()) == [second, first]


def test_a_signing_secret_copied_to_another_endpoint_of_the_tenant_does_not_open(
    tenant_a, member_of
):
    """A secret is sealed for its endpoint, as a mailbox's key and a webhook's secret are for
    their rows: someone who can write the table but not read the key ring cannot move one
    receiver's secret to another endpoint of the same tenant (it stays readable only where it
    was stored)."""
    admin = member_of(tenant_a, "admin").user
    mine, _ = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.rejected"], actor=admin
    )
    other, theirs = endpoint_create(
        tenant=tenant_a, url="https://b.example.com/", event_types=["draft.rejected"], actor=admin
    )
    AgentEventEndpoint.objects.filter(pk=mine.pk).update(secret_sealed=other.secret_sealed)
    mine.refresh_from_db()

    with pytest.raises(crypto.SecretUnreadable):
        mine.secrets(db_now())
    assert other.secrets(db_now()) == [theirs]


def _rebind(direction: str) -> None:
    module = importlib.import_module("intents.migrations.0033_agent_event_secret_bound_to_endpoint")
    getattr(module, direction)(apps, None)


def test_the_migration_reseals_tenant_bound_secrets_for_their_endpoint_and_can_run_twice(
    tenant_a, member_of
):
    admin = member_of(tenant_a, "admin").user
    endpoint, first = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.rejected"], actor=admin
    )
    endpoint, second = endpoint_rotate_secret(tenant=tenant_a, endpoint_id=endpoint.pk, actor=admin)
    old_aad = f"agent_event_endpoint:{tenant_a.pk}:secret"
    AgentEventEndpoint.objects.filter(pk=endpoint.pk).update(
        secret_sealed=crypto.seal(second, aad=old_aad),
        previous_secret_sealed=crypto.seal(first, aad=old_aad),
    )

    _rebind("bind_to_endpoint")
    _rebind("bind_to_endpoint")
    endpoint.refresh_from_db()
    assert endpoint.secrets(db_now()) == [second, first]

    _rebind("bind_to_tenant")
    _rebind("bind_to_tenant")
    endpoint.refresh_from_db()
    assert crypto.unseal(endpoint.secret_sealed, aad=old_aad) == second
    assert crypto.unseal(endpoint.previous_secret_sealed, aad=old_aad) == first
