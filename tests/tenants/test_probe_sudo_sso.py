"""Outside probe of sudo mode with single sign-on: a proof given by one tenant's identity
provider is that provider's word, good for its own tenant only."""

import time

import pytest
from django.urls import reverse

from tenants.models import AgentToken, Membership
from tests.tenants.test_sso_account_guard import provider_of
from tests.tenants.test_sso_callback import Provider
from tests.tenants.test_sudo import age_proof, idp, sent_to_confirm, sso_sign_in

pytestmark = pytest.mark.django_db

__all__ = ["idp"]


def test_a_proof_from_one_tenants_provider_does_not_open_another_tenants_guarded_actions(
    client, idp, tenant_a, tenant_b, member_of, settings
):
    """Carol's session came through A's provider and B's (she is an admin of B). A's admin runs
    A's provider and can sign her in there at will: with a stolen cookie of her session, a fresh
    sign-in at A's provider was a proof for B's guarded actions too (a new agent token of B,
    lasting API access, minted by A's admin)."""
    provider_of(tenant_a, member_of, idp, domains=["acme.test"])
    b_idp = Provider()
    try:
        provider_of(tenant_b, member_of, b_idp, domains=["acme.test"])
        start_a = reverse("sso_start", args=[tenant_a.slug])
        start_b = reverse("sso_start", args=[tenant_b.slug])
        sso_sign_in(client, idp, start_a)
        carol = Membership.objects.get(tenant=tenant_a, role="viewer").user
        member_of(tenant_b, "admin", user=carol)
        sso_sign_in(client, b_idp, start_b)
        age_proof(client, settings)

        # The thief, A's admin, with the cookie: a fresh sign-in at A's provider.
        sso_sign_in(client, idp, start_a, auth_time=int(time.time()))
        held = client.post(
            reverse("token_new", args=[tenant_b.slug]),
            {"name": "thief", "scopes": ["drafts:write"]},
        )
        confirm = client.get(held["Location"]).content.decode()
        # Carol's own fresh sign-in at B's provider is a proof for B.
        sso_sign_in(client, b_idp, start_b, auth_time=int(time.time()))
        made = client.post(
            reverse("token_new", args=[tenant_b.slug]),
            {"name": "carols", "scopes": ["drafts:write"]},
        )
    finally:
        b_idp.server.shutdown()

    assert sorted(client.session["cs_sso_tenants"]) == sorted([tenant_a.pk, tenant_b.pk])
    assert sent_to_confirm(held, reverse("token_list", args=[tenant_b.slug]))
    # The confirm page offers B's provider only: A's word would not do there.
    assert f"{start_b}?next=" in confirm
    assert f"{start_a}?next=" not in confirm
    assert made.status_code == 200
    assert list(AgentToken.objects.filter(tenant=tenant_b).values_list("name", flat=True)) == [
        "carols"
    ]
