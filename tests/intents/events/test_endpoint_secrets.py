"""Key rotation covers agent event endpoints: after ``reencrypt_secrets`` and dropping the old key
(DEPLOYMENT.md "Rotating secrets"), each endpoint's signing secret, and the previous one still
signing during its rotation's grace, open and sign as before."""

import io

import pytest
from django.core.management import call_command

from common import crypto
from config.clock import db_now
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
