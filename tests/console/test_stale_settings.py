"""The stale-save guard (tenants.stale) of the own-domains, deadlines and single sign-on forms:
two admins open the same page, one saves, and a save from the page the other opened before is
refused (409, nothing written, the page shows what is saved now) instead of silently putting back
what the first one changed."""

from __future__ import annotations

import hashlib
import json

import pyotp
import pytest
from django.urls import reverse

from tenants import oidc_signin
from tenants.models import AuditEvent, SingleSignOn, Tenant
from tests.pages import based_on
from tests.routed_client import RoutedClient

pytestmark = pytest.mark.django_db

ISSUER = "https://login.acme.test/realms/acme"
SECRET = "s3cret-from-the-idp-7f2c"


def _admin_client(tenant, member_of) -> RoutedClient:
    client = RoutedClient()
    client.force_login(
        member_of(tenant, "admin").user, backend="django.contrib.auth.backends.ModelBackend"
    )
    return client


def _policies(tenant) -> str:
    return reverse("admin_policies", args=[tenant.slug])


# --- the organisation's own domains (policies page) ---


def test_an_own_domains_save_from_an_older_page_is_refused_and_shows_the_current_domains(
    tenant_a, member_of
):
    """Alice adds a domain; Bob, from the page he opened before, adds another. His page still
    lacks Alice's: saving it would silently remove it."""
    Tenant.objects.filter(pk=tenant_a.pk).update(own_domains=["acme.test"])
    alice, bob = _admin_client(tenant_a, member_of), _admin_client(tenant_a, member_of)
    url = reverse("admin_own_domains", args=[tenant_a.slug])
    bobs = based_on(bob, _policies(tenant_a), "domains_form")
    alices = based_on(alice, _policies(tenant_a), "domains_form")
    saved = alice.post(url, {"own_domains": "acme.test\nsupport.acme.test", "based_on": alices})
    assert saved.status_code == 302

    refused = bob.post(url, {"own_domains": "acme.test\nbilling.acme.test", "based_on": bobs})

    assert Tenant.objects.get(pk=tenant_a.pk).own_domains == ["acme.test", "support.acme.test"]
    assert AuditEvent.objects.filter(action="tenant.policies_changed").count() == 1
    assert refused.status_code == 409
    page = refused.content.decode()
    assert "Someone changed your organisation&#x27;s domains since you opened this page." in page
    shown = refused.context["domains_form"]
    assert shown.initial["own_domains"] == "acme.test\nsupport.acme.test"
    assert "billing.acme.test" not in page
    assert shown["based_on"].value() == based_on(bob, _policies(tenant_a), "domains_form")


def test_an_own_domains_save_from_a_page_opened_after_the_last_save_goes_through(
    tenant_a, member_of
):
    alice, bob = _admin_client(tenant_a, member_of), _admin_client(tenant_a, member_of)
    url = reverse("admin_own_domains", args=[tenant_a.slug])
    alices = based_on(alice, _policies(tenant_a), "domains_form")
    assert alice.post(url, {"own_domains": "acme.test", "based_on": alices}).status_code == 302

    bobs = based_on(bob, _policies(tenant_a), "domains_form")
    saved = bob.post(url, {"own_domains": "acme.test, billing.acme.test", "based_on": bobs})

    assert saved.status_code == 302
    assert Tenant.objects.get(pk=tenant_a.pk).own_domains == ["acme.test", "billing.acme.test"]


def test_an_own_domains_post_without_what_it_was_based_on_saves_nothing(
    tenant_a, admin_a, signed_in
):
    client = signed_in(admin_a.user)
    page = client.post(
        reverse("admin_own_domains", args=[tenant_a.slug]), {"own_domains": "acme.test"}
    )
    assert page.status_code == 400
    assert "did not say which settings it was based on" in page.content.decode()
    assert Tenant.objects.get(pk=tenant_a.pk).own_domains == []
    assert not AuditEvent.objects.filter(action="tenant.policies_changed").exists()


# --- deadlines and escalation (policies page) ---


def _deadlines(**fields) -> dict:
    return {
        "sla_minutes": "",
        "sla_warning_minutes": "",
        "escalate_to": "",
        "escalate_to_role": "",
        **fields,
    }


def test_a_deadlines_save_from_an_older_page_is_refused_and_shows_the_current_settings(
    tenant_a, member_of
):
    """Alice sets a 60-minute target; Bob, from the page he opened before (no target), chooses
    a member to escalate to. Saving his page would silently remove Alice's target."""
    lead = member_of(tenant_a, "approver").user
    alice, bob = _admin_client(tenant_a, member_of), _admin_client(tenant_a, member_of)
    url = reverse("admin_deadlines", args=[tenant_a.slug])
    bobs = based_on(bob, _policies(tenant_a), "deadlines_form")
    alices = based_on(alice, _policies(tenant_a), "deadlines_form")
    saved = alice.post(url, _deadlines(sla_minutes="60", based_on=alices))
    assert saved.status_code == 302

    refused = bob.post(url, _deadlines(escalate_to=str(lead.pk), based_on=bobs))

    tenant = Tenant.objects.get(pk=tenant_a.pk)
    assert (tenant.sla_minutes, tenant.escalate_to_id) == (60, None)
    assert AuditEvent.objects.filter(action="tenant.deadlines_changed").count() == 1
    assert refused.status_code == 409
    assert (
        "Someone changed the target time to first decision since you opened this page."
        in refused.content.decode()
    )
    shown = refused.context["deadlines_form"]
    assert (shown.initial["sla_minutes"], shown.initial["escalate_to"]) == (60, None)
    assert shown["based_on"].value() == based_on(bob, _policies(tenant_a), "deadlines_form")


def test_a_deadlines_save_from_a_page_opened_after_the_last_save_goes_through(tenant_a, member_of):
    alice, bob = _admin_client(tenant_a, member_of), _admin_client(tenant_a, member_of)
    url = reverse("admin_deadlines", args=[tenant_a.slug])
    alices = based_on(alice, _policies(tenant_a), "deadlines_form")
    assert alice.post(url, _deadlines(sla_minutes="60", based_on=alices)).status_code == 302

    bobs = based_on(bob, _policies(tenant_a), "deadlines_form")
    saved = bob.post(url, _deadlines(sla_minutes="60", escalate_to_role="approver", based_on=bobs))

    assert saved.status_code == 302
    tenant = Tenant.objects.get(pk=tenant_a.pk)
    assert (tenant.sla_minutes, tenant.escalate_to_role) == (60, "approver")


def test_a_deadlines_post_without_what_it_was_based_on_saves_nothing(tenant_a, admin_a, signed_in):
    client = signed_in(admin_a.user)
    page = client.post(
        reverse("admin_deadlines", args=[tenant_a.slug]), _deadlines(sla_minutes="60")
    )
    assert page.status_code == 400
    assert "did not say which settings it was based on" in page.content.decode()
    assert Tenant.objects.get(pk=tenant_a.pk).sla_minutes is None
    assert not AuditEvent.objects.filter(action="tenant.deadlines_changed").exists()


# --- single sign-on (sign-in page) ---


@pytest.fixture
def sso(tenant_a, admin_a):
    return oidc_signin.sso_settings_save(
        tenant=tenant_a,
        actor=admin_a.user,
        enabled=True,
        issuer=ISSUER,
        client_id="countersign",
        client_secret=SECRET,
        password_signin_allowed=True,
        domains=["acme.test"],
        jit_role="",
    )


def _sso_post(**fields) -> dict:
    """What the sign-in page posts for ``sso`` when nothing is changed (the secret blank)."""
    return {
        "enabled": "on",
        "issuer": ISSUER,
        "client_id": "countersign",
        "client_secret": "",
        "password_signin_allowed": "on",
        "domains": "acme.test",
        "jit_role": "",
        **fields,
    }


def _signin(tenant) -> str:
    return reverse("admin_signin", args=[tenant.slug])


def _sso_state(tenant) -> tuple:
    saved = SingleSignOn.objects.get(tenant=tenant)
    return (saved.client_id, saved.jit_role, oidc_signin.client_secret(saved))


def test_an_sso_save_from_an_older_page_is_refused_and_shows_the_current_settings(
    tenant_a, member_of, sso
):
    """Alice lets new people from the provider join as viewers; Bob, from the page he opened
    before, changes the client ID and secret. His page still says "refused until invited":
    saving it would silently undo Alice's choice."""
    alice, bob = _admin_client(tenant_a, member_of), _admin_client(tenant_a, member_of)
    url = reverse("admin_sso_settings", args=[tenant_a.slug])
    bobs = based_on(bob, _signin(tenant_a), "sso_form")
    alices = based_on(alice, _signin(tenant_a), "sso_form")
    assert alice.post(url, _sso_post(jit_role="viewer", based_on=alices)).status_code == 302

    refused = bob.post(
        url, _sso_post(client_id="countersign-2", client_secret="bobs-new-secret", based_on=bobs)
    )

    assert _sso_state(tenant_a) == ("countersign", "viewer", SECRET)
    assert AuditEvent.objects.filter(action="tenant.sso_changed").count() == 2
    assert refused.status_code == 409
    page = refused.content.decode()
    assert (
        "Someone changed what becomes of new people from the identity provider since you "
        "opened this page." in page
    )
    shown = refused.context["sso_form"]
    assert (shown.initial["client_id"], shown.initial["jit_role"]) == ("countersign", "viewer")
    assert "countersign-2" not in page and "bobs-new-secret" not in page
    assert shown["based_on"].value() == based_on(bob, _signin(tenant_a), "sso_form")


def test_a_first_sso_setup_from_an_older_page_is_refused(tenant_a, member_of):
    """Both open the page before any provider is set up; Alice sets one up, and Bob's setup
    from his page would replace hers wholesale."""
    alice, bob = _admin_client(tenant_a, member_of), _admin_client(tenant_a, member_of)
    url = reverse("admin_sso_settings", args=[tenant_a.slug])
    bobs = based_on(bob, _signin(tenant_a), "sso_form")
    alices = based_on(alice, _signin(tenant_a), "sso_form")
    assert alice.post(url, _sso_post(client_secret=SECRET, based_on=alices)).status_code == 302

    refused = bob.post(
        url, _sso_post(client_id="other", client_secret="bobs-new-secret", based_on=bobs)
    )

    assert refused.status_code == 409
    assert "the client ID" in refused.content.decode()
    assert _sso_state(tenant_a) == ("countersign", "", SECRET)


def test_an_sso_save_from_a_page_opened_after_the_last_save_goes_through(tenant_a, member_of, sso):
    alice, bob = _admin_client(tenant_a, member_of), _admin_client(tenant_a, member_of)
    url = reverse("admin_sso_settings", args=[tenant_a.slug])
    alices = based_on(alice, _signin(tenant_a), "sso_form")
    assert alice.post(url, _sso_post(jit_role="viewer", based_on=alices)).status_code == 302

    bobs = based_on(bob, _signin(tenant_a), "sso_form")
    saved = bob.post(url, _sso_post(jit_role="viewer", client_id="countersign-2", based_on=bobs))

    assert saved.status_code == 302
    assert _sso_state(tenant_a) == ("countersign-2", "viewer", SECRET)


def test_a_secret_rotated_by_another_admin_leaves_the_page_current_and_is_kept(
    tenant_a, member_of, sso
):
    """The page never showed the secret, so a rotation does not make it stale; its blank
    secret field keeps the rotated secret."""
    alice, bob = _admin_client(tenant_a, member_of), _admin_client(tenant_a, member_of)
    url = reverse("admin_sso_settings", args=[tenant_a.slug])
    bobs = based_on(bob, _signin(tenant_a), "sso_form")
    alices = based_on(alice, _signin(tenant_a), "sso_form")
    rotated = alice.post(url, _sso_post(client_secret="rotated-secret", based_on=alices))
    assert rotated.status_code == 302

    saved = bob.post(url, _sso_post(jit_role="viewer", based_on=bobs))

    assert saved.status_code == 302
    assert _sso_state(tenant_a) == ("countersign", "viewer", "rotated-secret")


def test_an_sso_post_without_what_it_was_based_on_saves_nothing(tenant_a, admin_a, signed_in, sso):
    client = signed_in(admin_a.user)
    page = client.post(
        reverse("admin_sso_settings", args=[tenant_a.slug]),
        _sso_post(client_id="countersign-2", client_secret="new-secret"),
    )
    assert page.status_code == 400
    assert "did not say which settings it was based on" in page.content.decode()
    assert _sso_state(tenant_a) == ("countersign", "", SECRET)
    assert AuditEvent.objects.filter(action="tenant.sso_changed").count() == 1


def _derived_from(secret: str) -> list[str]:
    """The secret and the sha256 hex prefixes a page could leak it by (of the bare secret and of
    the canonical JSON that tenants.stale digests)."""
    return [
        secret,
        hashlib.sha256(secret.encode()).hexdigest()[:8],
        hashlib.sha256(json.dumps(secret).encode()).hexdigest()[:8],
    ]


def test_the_sign_in_page_never_carries_the_client_secret_or_a_digest_of_it(
    tenant_a, member_of, sso
):
    """Not on the page, not in what its form is based on: not when it is opened, not when a
    stale save is refused, not when a post without ``based_on`` is refused."""
    alice, bob = _admin_client(tenant_a, member_of), _admin_client(tenant_a, member_of)
    url = reverse("admin_sso_settings", args=[tenant_a.slug])
    opened = bob.get(_signin(tenant_a))
    bobs = opened.context["sso_form"]["based_on"].value()
    alices = based_on(alice, _signin(tenant_a), "sso_form")
    assert alice.post(url, _sso_post(jit_role="viewer", based_on=alices)).status_code == 302
    refused = bob.post(url, _sso_post(based_on=bobs))
    unbased = bob.post(url, _sso_post())

    assert (opened.status_code, refused.status_code, unbased.status_code) == (200, 409, 400)
    assert bobs
    pages = [r.content.decode() for r in (opened, refused, unbased)]
    assert [leak for page in pages for leak in _derived_from(SECRET) if leak in page] == []


# --- a mailbox's deadline and assignment (mailbox page) ---


def test_a_mailbox_assignment_save_from_an_older_page_is_refused_and_shows_the_current_one(
    tenant_a, member_of, mailbox_a
):
    """Alice turns automatic assignment on; Bob, from the page he opened before, sets the
    mailbox's target. His page still shows assignment off: saving it would turn it off again."""
    alice, bob = _admin_client(tenant_a, member_of), _admin_client(tenant_a, member_of)
    page = reverse("mailbox_detail", args=[tenant_a.slug, mailbox_a.pk])
    url = reverse("mailbox_assignment", args=[tenant_a.slug, mailbox_a.pk])
    bobs = based_on(bob, page, "assignment_form")
    alices = based_on(alice, page, "assignment_form")
    assert alice.post(url, {"auto_assign": "on", "based_on": alices}).status_code == 302

    refused = bob.post(url, {"sla_minutes": "30", "based_on": bobs})

    mailbox_a.refresh_from_db()
    assert (mailbox_a.sla_minutes, mailbox_a.auto_assign) == (None, True)
    assert AuditEvent.objects.filter(action="mailbox.assignment_changed").count() == 1
    assert refused.status_code == 409
    assert "Someone changed automatic assignment since you opened this page." in (
        refused.content.decode()
    )
    shown = refused.context["assignment_form"]
    assert (shown.initial["sla_minutes"], shown.initial["auto_assign"]) == (None, True)
    assert shown["based_on"].value() == based_on(bob, page, "assignment_form")

    again = bob.post(
        url, {"sla_minutes": "30", "auto_assign": "on", "based_on": shown["based_on"].value()}
    )
    assert again.status_code == 302
    mailbox_a.refresh_from_db()
    assert (mailbox_a.sla_minutes, mailbox_a.auto_assign) == (30, True)


def test_a_mailbox_assignment_post_without_what_it_was_based_on_saves_nothing(
    tenant_a, admin_a, signed_in, mailbox_a
):
    client = signed_in(admin_a.user)
    url = reverse("mailbox_assignment", args=[tenant_a.slug, mailbox_a.pk])
    page = client.post(url, {"sla_minutes": "30", "auto_assign": "on"})
    assert page.status_code == 400
    assert "did not say which settings it was based on" in page.content.decode()
    mailbox_a.refresh_from_db()
    assert (mailbox_a.sla_minutes, mailbox_a.auto_assign) == (None, False)


# --- a member's role (member page) ---


def test_a_role_save_from_an_older_page_is_refused_and_shows_the_current_role(tenant_a, member_of):
    """Alice makes Carol a viewer; Bob, from the page he opened before (Carol an approver), saves
    Carol as an approver again: that silently undid Alice's change."""
    carol = member_of(tenant_a, "approver")
    alice, bob = _admin_client(tenant_a, member_of), _admin_client(tenant_a, member_of)
    page = reverse("admin_member", args=[tenant_a.slug, carol.pk])
    url = reverse("admin_member_role", args=[tenant_a.slug, carol.pk])
    bobs = based_on(bob, page, "role_form")
    alices = based_on(alice, page, "role_form")
    assert alice.post(url, {"role": "viewer", "based_on": alices}).status_code == 302

    refused = bob.post(url, {"role": "approver", "based_on": bobs})

    carol.refresh_from_db()
    assert carol.role == "viewer"
    assert AuditEvent.objects.filter(action="member.role_changed").count() == 1
    assert refused.status_code == 409
    assert "Someone changed their role since you opened this page." in refused.content.decode()
    shown = refused.context["role_form"]
    assert shown.initial["role"] == "viewer"
    assert shown["based_on"].value() == based_on(bob, page, "role_form")


def test_a_role_post_without_what_it_was_based_on_saves_nothing(
    tenant_a, member_of, admin_a, signed_in
):
    carol = member_of(tenant_a, "approver")
    client = signed_in(admin_a.user)
    page = client.post(
        reverse("admin_member_role", args=[tenant_a.slug, carol.pk]), {"role": "viewer"}
    )
    assert page.status_code == 400
    assert "did not say which settings it was based on" in page.content.decode()
    carol.refresh_from_db()
    assert carol.role == "approver"


# --- the two-factor requirement (sign-in page) ---


def _enrol(client) -> None:
    """An authenticator app set up in this session, so a requirement does not gate it."""
    secret = client.post(reverse("totp_enrol")).context["secret"]
    client.post(reverse("totp_confirm"), {"code": pyotp.TOTP(secret).now()})


def test_a_two_factor_save_from_an_older_page_is_refused_and_shows_the_current_requirement(
    tenant_a, member_of
):
    """Alice requires two-factor sign-in; Bob, from the page he opened before (not required),
    saves the form as it showed: that silently made it optional again."""
    alice, bob = _admin_client(tenant_a, member_of), _admin_client(tenant_a, member_of)
    for admin in (alice, bob):
        _enrol(admin)
    url = reverse("admin_two_factor_policy", args=[tenant_a.slug])
    bobs = based_on(bob, _signin(tenant_a), "two_factor_form")
    alices = based_on(alice, _signin(tenant_a), "two_factor_form")
    assert alice.post(url, {"require_two_factor": "on", "based_on": alices}).status_code == 302

    refused = bob.post(url, {"based_on": bobs})

    assert Tenant.objects.get(pk=tenant_a.pk).require_two_factor
    assert AuditEvent.objects.filter(action__startswith="tenant.two_factor_").count() == 1
    assert refused.status_code == 409
    assert (
        "Someone changed whether members need two-factor sign-in since you opened this page."
        in refused.content.decode()
    )
    shown = refused.context["two_factor_form"]
    assert shown.initial["require_two_factor"] is True
    assert shown["based_on"].value() == based_on(bob, _signin(tenant_a), "two_factor_form")


def test_a_two_factor_post_without_what_it_was_based_on_saves_nothing(tenant_a, admin_a, signed_in):
    client = signed_in(admin_a.user)
    page = client.post(
        reverse("admin_two_factor_policy", args=[tenant_a.slug]), {"require_two_factor": "on"}
    )
    assert page.status_code == 400
    assert "did not say which settings it was based on" in page.content.decode()
    assert not Tenant.objects.get(pk=tenant_a.pk).require_two_factor
