"""In headless Chromium, against a real OpenID Connect provider on loopback (tests/idp, a second
Django process with django-oauth-toolkit): the full authorization code flow signs a member in; a
newcomer in the tenant's domain joins as the role the admin chose; an address outside the
tenant's domains is refused."""

import re

from tenants import oidc_signin
from tenants.models import AuditEvent, Membership
from tests.browser import BROWSER_MARKS

pytestmark = BROWSER_MARKS


def through_the_provider(page, tenant, username, password):
    page.goto("/signin/")
    page.click("text=Sign in with single sign-on")
    page.fill("input[name=tenant]", tenant.slug)
    page.click("button:has-text('Continue')")
    page.click("#sso-continue")
    page.wait_for_selector("text=Example identity provider")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button:has-text('Sign in to the identity provider')")


def test_the_code_flow_through_a_real_provider(
    chromium, live_server, transactional_db, identity_provider, tenant_a, member_of
):
    admin = member_of(tenant_a, "admin").user
    oidc_signin.sso_settings_save(
        tenant=tenant_a,
        actor=admin,
        enabled=True,
        issuer=identity_provider.issuer,
        client_id=identity_provider.client_id,
        client_secret=identity_provider.client_secret,
        password_signin_allowed=False,
        domains=["acme.test"],
        jit_role="viewer",
    )
    alice = member_of(tenant_a, "approver", user__email="alice@acme.test").user

    def new_page():
        page = chromium.new_context(base_url=live_server.url).new_page()
        page.set_default_timeout(15_000)
        return page

    page = new_page()
    through_the_provider(page, tenant_a, "alice", identity_provider.password)
    page.wait_for_url(re.compile(rf"/t/{tenant_a.slug}/$"))
    assert page.locator("header .user", has_text=alice.display_name).count() == 1
    page.goto("/account/sessions/")
    assert page.locator("#sessions", has_text="Signed in with single sign-on").count() == 1
    page.context.close()

    newcomer = new_page()
    through_the_provider(newcomer, tenant_a, "newbie", identity_provider.password)
    newcomer.wait_for_url(re.compile(rf"/t/{tenant_a.slug}/$"))
    assert Membership.objects.get(user__email="newbie@acme.test", tenant=tenant_a).role == "viewer"
    newcomer.context.close()

    stranger = new_page()
    through_the_provider(stranger, tenant_a, "eve", identity_provider.password)
    stranger.wait_for_selector("text=Single sign-on did not work")
    assert stranger.locator("[role=alert]", has_text="not an address of this company").count() == 1
    stranger.goto(f"/t/{tenant_a.slug}/")
    assert "/signin/" in stranger.url
    stranger.context.close()

    actions = list(AuditEvent.objects.filter(tenant=tenant_a).values_list("action", flat=True))
    assert actions.count("signin.sso_linked") == 2
    assert "signin.sso_refused" in actions and "member.created_by_sso" in actions
    refused = AuditEvent.objects.get(action="signin.sso_refused", tenant=tenant_a)
    assert refused.data == {"email": "eve@elsewhere.test", "reason": "domain_not_allowed"}
