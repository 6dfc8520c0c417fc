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


def test_the_migrations_reverse_seals_them_for_the_tenant_again_and_can_run_twice(
    tenant_a, member_of
):
    """For a rollback: the release before opens only what is sealed for the tenant alone."""
    admin = member_of(tenant_a, "admin").user
    endpoint, first = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.rejected"], actor=admin
    )
    endpoint, second = endpoint_rotate_secret(tenant=tenant_a, endpoint_id=endpoint.pk, actor=admin)
    module = importlib.import_module("intents.migrations.0033_agent_event_secret_bound_to_endpoint")

    module.bind_to_tenant(apps, None)
    module.bind_to_tenant(apps, None)

    endpoint.refresh_from_db()
    old_aad = f"agent_event_endpoint:{tenant_a.pk}:secret"
    assert crypto.unseal(endpoint.secret_sealed, aad=old_aad) == second
    assert crypto.unseal(endpoint.previous_secret_sealed, aad=old_aad) == first
    assert endpoint.secrets(db_now()) == [second, first]


def _sealed_as_the_release_before(endpoint, first: str, second: str) -> str:
    old_aad = f"agent_event_endpoint:{endpoint.tenant_id}:secret"
    AgentEventEndpoint.objects.filter(pk=endpoint.pk).update(
        secret_sealed=crypto.seal(second, aad=old_aad),
        previous_secret_sealed=crypto.seal(first, aad=old_aad),
    )
    return old_aad


def test_the_migration_leaves_the_secrets_as_the_release_before_reads_them(tenant_a, member_of):
    """Found by an outside probe of an upgrade with the release before still running: 0033
    sealed every endpoint's secret for its row in the migration, which that release cannot open,
    so each of its deliveries failed (SecretUnreadable) from the migrate on, and for good after
    a rollback. The migration changes nothing now; the new release reads both ways, and
    ``reencrypt_secrets`` binds them once no old process is left (DEPLOYMENT.md "Upgrading")."""
    admin = member_of(tenant_a, "admin").user
    endpoint, first = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.rejected"], actor=admin
    )
    endpoint, second = endpoint_rotate_secret(tenant=tenant_a, endpoint_id=endpoint.pk, actor=admin)
    old_aad = _sealed_as_the_release_before(endpoint, first, second)
    module = importlib.import_module("intents.migrations.0033_agent_event_secret_bound_to_endpoint")

    module.Migration.operations[0].code(apps, None)

    endpoint.refresh_from_db()
    assert crypto.unseal(endpoint.secret_sealed, aad=old_aad) == second
    assert crypto.unseal(endpoint.previous_secret_sealed, aad=old_aad) == first
    assert endpoint.secrets(db_now()) == [second, first]


def test_reencrypt_secrets_binds_the_release_befores_secrets_to_their_endpoint(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    endpoint, first = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.rejected"], actor=admin
    )
    endpoint, second = endpoint_rotate_secret(tenant=tenant_a, endpoint_id=endpoint.pk, actor=admin)
    old_aad = _sealed_as_the_release_before(endpoint, first, second)

    out = io.StringIO()
    call_command("reencrypt_secrets", stdout=out)
    call_command("reencrypt_secrets", stdout=io.StringIO())

    endpoint.refresh_from_db()
    assert "the signing secrets of 1 agent event endpoints" in out.getvalue()
    with pytest.raises(crypto.SecretUnreadable):
        crypto.unseal(endpoint.secret_sealed, aad=old_aad)
    with pytest.raises(crypto.SecretUnreadable):
        crypto.unseal(endpoint.previous_secret_sealed, aad=old_aad)
    assert endpoint.secrets(db_now()) == [second, first]
