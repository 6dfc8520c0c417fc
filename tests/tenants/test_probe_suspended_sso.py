"""A suspended tenant takes no new members, through its identity provider either (an outside
probe). Invitations and the operator's ``tenant_invite_admin`` refused a suspended tenant's
newcomers, but single sign-on with just-in-time accounts made a new account and membership in
it (``member.created_by_sso``) and signed them in. Its existing members still sign in: a
suspended tenant stays readable."""

import threading
import time

import pytest
from django.db import connection, transaction
from django.urls import reverse

from tenants import oidc_signin
from tenants.models import AuditEvent, Membership, User
from tenants.onboarding import tenant_resume, tenant_suspend
from tests.tenants.test_sso_callback import CLIENT, Provider, start


@pytest.fixture
def provider():
    served = Provider()
    yield served
    served.server.shutdown()


def newcomers_join(tenant, admin, provider) -> None:
    """Single sign-on through ``provider``, newcomers of acme.test joining as approvers."""
    oidc_signin.sso_settings_save(
        tenant=tenant,
        actor=admin,
        enabled=True,
        issuer=provider.issuer,
        client_id=CLIENT,
        client_secret="client-secret-at-the-provider",
        password_signin_allowed=False,
        domains=["acme.test"],
        jit_role="approver",
    )


@pytest.fixture
def suspended_with_jit(db, tenant_a, member_of, provider):
    newcomers_join(tenant_a, member_of(tenant_a, "admin").user, provider)
    tenant_suspend(slug=tenant_a.slug, reason="Unpaid invoice 2024-117")
    return tenant_a


def sign_in_through_provider(client, provider, tenant, **claims):
    flow = start(client, tenant)
    provider.id_token = provider.sign(flow["nonce"], **claims)
    return client.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})


def test_a_suspended_tenant_signs_in_its_members_but_takes_no_newcomer_until_resumed(
    client, provider, suspended_with_jit, member_of
):
    tenant = suspended_with_jit
    member_of(tenant, "approver", user__email="alice@acme.test")
    response = sign_in_through_provider(client, provider, tenant)
    assert response.status_code == 302
    assert client.get(response["Location"]).status_code == 200
    client.logout()

    response = sign_in_through_provider(
        client, provider, tenant, sub="new-1", email="newbie@acme.test"
    )
    assert response.status_code == 403
    assert "suspended" in response.content.decode()
    assert not User.objects.filter(email="newbie@acme.test").exists()
    assert not AuditEvent.objects.filter(action="member.created_by_sso").exists()
    refused = AuditEvent.objects.get(action="signin.sso_refused", tenant=tenant)
    assert refused.data["reason"] == "suspended"
    assert client.get(reverse("tenant_home", args=[tenant.slug])).status_code == 302

    tenant_resume(slug=tenant.slug)
    response = sign_in_through_provider(
        client, provider, tenant, sub="new-1", email="newbie@acme.test"
    )
    assert response.status_code == 302
    joined = Membership.objects.get(tenant=tenant, user__email="newbie@acme.test")
    assert joined.role == "approver"


@pytest.mark.django_db(transaction=True)
def test_a_newcomer_racing_a_suspension_waits_for_it_and_is_refused(tenant_a, member_of, provider):
    """The newcomer's check locks the tenant's row against the suspension's lock: a suspension
    committing meanwhile is waited for and seen (a plain read saw the tenant still active and
    made the account)."""
    newcomers_join(tenant_a, member_of(tenant_a, "admin").user, provider)
    suspended, release, outcome = threading.Event(), threading.Event(), {}

    def suspend():
        try:
            with transaction.atomic():
                tenant_suspend(slug=tenant_a.slug, reason="Unpaid invoice 2024-118")
                suspended.set()
                release.wait(10)  # the row stays locked until this commits
        finally:
            connection.close()

    def join():
        suspended.wait(10)
        try:
            oidc_signin.sso_member_for(
                tenant=tenant_a,
                claims={"sub": "new-2", "email": "racer@acme.test", "email_verified": True},
            )
            outcome["result"] = "joined"
        except oidc_signin.SsoRefused as refused:
            outcome["result"] = refused.code
        finally:
            connection.close()

    threads = [threading.Thread(target=suspend), threading.Thread(target=join)]
    for thread in threads:
        thread.start()
    suspended.wait(10)
    time.sleep(0.5)
    waiting = threads[1].is_alive()  # on the tenant's row, until the suspension commits
    release.set()
    for thread in threads:
        thread.join(10)

    assert waiting
    assert outcome["result"] == "suspended"
    assert not User.objects.filter(email="racer@acme.test").exists()
