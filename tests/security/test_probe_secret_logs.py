"""Secrets probe: flows that handle each secret (provisioning, agent tokens right and wrong, an
unsigned webhook, an invitation link, a wrong password, two-factor enrolment and a wrong recovery
code, single sign-on settings and a provider that does not answer, an agent events endpoint) run
with every log record captured by tests/security/secret_scan.py (every logger at DEBUG, both
production formatters, and each record's own message, args, extra values and exception).
Neither those records, nor the tenant's audit rows, nor any list or change page of the
operators' admin holds a secret, its sealed form or its digest."""

import json

import pytest
from django.test import Client
from django_otp.oath import TOTP

from intents.models_events import AgentEventEndpoint
from intents.services.event_endpoints import endpoint_create
from tenants import invitations, oidc_signin, two_factor
from tenants.models import AgentToken, AuditEvent, Invitation, User
from tenants.models_signin import SingleSignOn
from tenants.tokens import token_create
from tests.security.secret_scan import captured_logs, leaked
from webhooks.models import WebhookEndpoint, WebhookSecret

pytestmark = pytest.mark.django_db


def test_secrets_stay_out_of_debug_logs_audit_rows_and_the_operators_admin(
    tenant_a, member_of, mailbox_factory, sandbox
):
    with captured_logs() as logs:
        secrets, stored = _every_flow(tenant_a, member_of, mailbox_factory, sandbox)
    audit = json.dumps(list(AuditEvent.objects.values_list("data", flat=True)), default=str)
    assert leaked(secrets, [*logs.texts(), audit]) == []
    pages = _admin_pages()
    assert AgentToken.objects.get(tenant=tenant_a).prefix in "".join(pages)
    assert leaked(stored, pages) == []


def _every_flow(tenant_a, member_of, mailbox_factory, sandbox):
    """Each flow that handles a secret, checked for its answer; the secrets it handled, and
    those with their sealed forms and digests."""
    admin = member_of(tenant_a, "admin").user
    mailbox = mailbox_factory(tenant_a)
    _, agent_token = token_create(tenant=tenant_a, name="logs", scopes=["drafts:read"], actor=admin)
    api = Client()
    ok = api.get("/api/v1/mailboxes", HTTP_AUTHORIZATION=f"Bearer {agent_token}")
    wrong = agent_token[:-6] + "zzzzzz"
    refused = api.get("/api/v1/mailboxes", HTTP_AUTHORIZATION=f"Bearer {wrong}")
    endpoint = WebhookEndpoint.objects.get(tenant=tenant_a)
    unsigned = api.post(
        f"/webhooks/agentmail/{endpoint.public_id}/",
        data=json.dumps({"event_type": "message.sent"}),
        content_type="application/json",
        HTTP_SVIX_ID="msg_1",
        HTTP_SVIX_TIMESTAMP="1",
        HTTP_SVIX_SIGNATURE="v1,AAAA",
    )
    _, link = invitations.invitation_create(
        tenant=tenant_a, email="new@example.test", role="viewer", actor=admin
    )
    invitee = Client()
    opened = invitee.get(f"/invitations/{link}/")
    posted_to_link = invitee.post(f"/invitations/{link}/", {})
    typed = "typed-wrong-Passphrase-91"
    signin = Client().post("/signin/", {"username": admin.email, "password": typed})
    device = two_factor.totp_begin(user=admin)
    seed = two_factor.totp_secret(device)
    with pytest.raises(two_factor.TwoFactorError):
        two_factor.totp_confirm(user=admin, code="000000")
    code = TOTP(bytes.fromhex(_seed_hex(device)), 30, 0, 6, 0).token()
    recovery = two_factor.totp_confirm(user=admin, code=f"{code:06d}")
    with pytest.raises(two_factor.TwoFactorError):
        two_factor.second_factor_verify(user=admin, code=recovery[0] + "x")

    sso_secret = "sso-client-secret-5b2e91d7"
    oidc_signin.sso_settings_save(
        tenant=tenant_a,
        actor=admin,
        enabled=True,
        issuer="http://127.0.0.1:9/idp",
        client_id="countersign",
        client_secret=sso_secret,
        password_signin_allowed=True,
        domains=["example.test"],
        jit_role="",
    )
    sso_start = Client().get(f"/sso/start/{tenant_a.slug}/")
    events, event_secret = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.approved"], actor=admin
    )
    secrets = {
        "sso client secret": sso_secret,
        "agent event secret": event_secret,
        "org key": sandbox.org_key,
        "mailbox key": mailbox.api_key(),
        "webhook secret": WebhookSecret.objects.get(endpoint=endpoint).plaintext(),
        "agent token": agent_token,
        "wrong token": wrong,
        "invitation link": link,
        "typed password": typed,
        "totp seed": seed,
        "recovery code": recovery[0],
    }
    stored = {
        **secrets,
        "sealed mailbox key": mailbox.api_key_sealed,
        "sealed webhook secret": WebhookSecret.objects.get(endpoint=endpoint).sealed,
        "sealed seed": device.sealed_key,
        "sealed sso secret": SingleSignOn.objects.get(tenant=tenant_a).sealed_client_secret,
        "sealed event secret": AgentEventEndpoint.objects.get(pk=events.pk).secret_sealed,
        "token digest": AgentToken.objects.get(tenant=tenant_a).digest,
        "invitation digest": Invitation.objects.get(tenant=tenant_a).digest,
        "recovery digest": two_factor.recovery_digest(recovery[1]),
    }
    assert sso_start.status_code == 502  # the provider at port 9 does not answer
    assert (ok.status_code, refused.status_code, unsigned.status_code) == (200, 401, 400)
    assert (opened.status_code, posted_to_link.status_code, signin.status_code) == (302, 405, 200)
    return secrets, stored


def _seed_hex(device) -> str:
    from mailboxes import crypto

    return crypto.unseal(device.sealed_key, aad=f"totp:{device.user_id}:seed")


def _admin_pages() -> list[str]:
    """Every list and change page of the operators' admin, as a superuser reads them."""
    from django.contrib import admin

    operator = Client()
    operator.force_login(User.objects.create_superuser("ops@countersign.test", "operator-pass-1"))
    pages = []
    for model in admin.site._registry:
        base = f"/ops/admin/{model._meta.app_label}/{model._meta.model_name}/"
        pages.append(operator.get(base).content.decode())
        for pk in model._default_manager.values_list("pk", flat=True):
            pages.append(operator.get(f"{base}{pk}/change/").content.decode())
    return pages
