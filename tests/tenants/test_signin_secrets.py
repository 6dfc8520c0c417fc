"""Key rotation covers the sign-in secrets too: after ``reencrypt_secrets`` and dropping the old
key, authenticator seeds and single sign-on client secrets still open."""

import pytest
from django.core.management import call_command

from common import crypto
from tenants import oidc_signin, two_factor
from tenants.models import SingleSignOn, TotpDevice

pytestmark = pytest.mark.django_db


def test_rotation_reseals_authenticator_seeds_and_client_secrets(tenant_a, member_of, settings):
    admin = member_of(tenant_a, "admin").user
    device = two_factor.totp_begin(user=admin)
    seed = two_factor.totp_secret(device)
    oidc_signin.sso_settings_save(
        tenant=tenant_a,
        actor=admin,
        enabled=False,
        issuer="https://login.acme.test",
        client_id="c",
        client_secret="the-client-secret",
        password_signin_allowed=True,
        domains=["acme.test"],
        jit_role="",
    )
    settings.SECRET_ENCRYPTION_KEYS = [crypto.generate_key("k2"), *settings.SECRET_ENCRYPTION_KEYS]
    call_command("reencrypt_secrets")
    settings.SECRET_ENCRYPTION_KEYS = settings.SECRET_ENCRYPTION_KEYS[:1]
    device = TotpDevice.objects.get(pk=device.pk)
    sso = SingleSignOn.objects.get(tenant=tenant_a)
    assert crypto.key_id_of(device.sealed_key) == crypto.key_id_of(sso.sealed_client_secret) == "k2"
    assert two_factor.totp_secret(device) == seed
    assert oidc_signin.client_secret(sso) == "the-client-secret"
