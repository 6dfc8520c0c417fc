"""Secrets probe, the flows tests/security/test_probe_secret_logs.py leaves out, through the
harness (tests/security/secret_scan.py): an agent token where it does not belong, webhook
deliveries signed right and wrong, AgentMail refusing or failing sends, a password change, an
invitation accepted with a new account, the operators' commands that touch keys, and the pages
that show a secret once, read again after."""

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import path

from common import crypto
from intents import sending
from intents.models import SendIntent
from intents.services.event_endpoints import endpoint_create, endpoint_rotate_secret
from mailboxes import provisioning
from mailboxes.models import Mailbox
from tenants import invitations, oidc_signin
from tenants.tokens import token_create
from tests.factories import approve_new_draft
from tests.security.secret_scan import captured_logs, database_text, leaked
from tests.tenants.test_two_factor import enrol
from tests.webhooks.conftest import Hook, new_svix_id
from webhooks.models import WebhookEndpoint, WebhookSecret

pytestmark = pytest.mark.django_db


def test_an_agent_token_in_the_wrong_place_is_refused_and_shown_nowhere(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    _, token = token_create(tenant=tenant_a, name="probe", scopes=["drafts:write"], actor=admin)
    api = Client()
    draft = json.dumps({"mailbox_id": 1, "to": ["a@example.test"], "subject": "s", "text": token})

    with captured_logs() as logs:
        answers = [
            api.get("/api/v1/mailboxes", HTTP_AUTHORIZATION=token),
            api.get("/api/v1/mailboxes", HTTP_AUTHORIZATION=f"Token {token}"),
            api.get("/api/v1/mailboxes", HTTP_AUTHORIZATION=f"Bearer {token}x"),
            api.get("/api/v1/mailboxes", HTTP_X_API_KEY=token),
            api.get(f"/api/v1/mailboxes?access_token={token}"),
            api.post("/api/v1/drafts", draft, content_type="application/json"),
        ]

    bodies = [answer.content.decode() for answer in answers]
    assert [answer.status_code for answer in answers] == [401] * 6
    assert leaked({"token": token}, bodies + logs.texts()) == []


def test_webhook_deliveries_signed_right_and_wrong_log_no_secret(
    tenant_a, mailbox_factory, sandbox
):
    mailbox = mailbox_factory(tenant_a)
    endpoint = WebhookEndpoint.objects.get(tenant=tenant_a)
    secret = WebhookSecret.objects.get(endpoint=endpoint, retired_at=None).plaintext()
    hook = Hook(endpoint, secret)
    payload = {
        "event_type": "message.received",
        "event_id": "evt_probe",
        "message": {"inbox_id": mailbox.inbox_id, "message_id": "<m1@example.test>"},
    }
    body = json.dumps(payload)
    client = Client()

    with captured_logs() as logs:
        good = hook.post(client, payload)
        wrong = hook.post_raw(
            client,
            body.encode(),
            hook.headers(body, svix_id=new_svix_id(), secret="whsec_" + "A" * 32),
        )

    assert (good.status_code, wrong.status_code) == (200, 400)
    assert leaked({"webhook secret": secret}, logs.texts()) == []


@pytest.mark.parametrize("mode", ["401_unknown_key", "500_before", "timeout_after_accept"])
def test_agentmail_refusing_or_failing_a_send_logs_and_stores_no_key(
    tenant_a, member_of, signed_in, mailbox_factory, sandbox, settings, mode
):
    settings.AGENTMAIL_READ_TIMEOUT = 1
    approver = member_of(tenant_a, "approver").user
    mailbox = mailbox_factory(tenant_a)
    intent = approve_new_draft(tenant_a, mailbox, approver)
    sandbox.fault("sends", mode, times=0, delay=2)

    with captured_logs() as logs:
        sending.run_once(worker="w", limit=10)
        page = signed_in(approver).get(f"/t/{tenant_a.slug}/outbox/{intent.pk}/")

    secrets = {"inbox key": mailbox.api_key(), "org key": sandbox.org_key}
    assert page.status_code == 200
    assert SendIntent.objects.get(pk=intent.pk).state in ("queued", "uncertain")
    assert leaked(secrets, [page.content.decode(), *logs.texts(), *database_text()]) == []


def test_a_password_change_and_an_invitation_accepted_log_no_password_session_or_link(
    tenant_a, member_of, settings
):
    admin = member_of(tenant_a, "admin").user
    _, link = invitations.invitation_create(
        tenant=tenant_a, email="new@example.test", role="viewer", actor=admin
    )
    chosen = "chosen-Passphrase-4f81"
    changed = "changed-Passphrase-90d2"
    invitee = Client()

    with captured_logs() as logs:
        opened = invitee.get(f"/invitations/{link}/", follow=True)
        form = opened.redirect_chain[-1][0]
        accepted = invitee.post(
            form,
            {"full_name": "New Person", "new_password1": chosen, "new_password2": chosen},
        )
        person = Client()
        signin = person.post("/signin/", {"username": "new@example.test", "password": chosen})
        session = person.cookies[settings.SESSION_COOKIE_NAME].value
        csrf = person.get("/account/password/").context["csrf_token"]
        change = person.post(
            "/account/password/",
            {"old_password": chosen, "new_password1": changed, "new_password2": changed},
        )
        Client().post("/signin/", {"username": admin.email, "password": chosen})

    secrets = {
        "invitation link": link,
        "first password": chosen,
        "new password": changed,
        "session id": session,
        "new session id": person.cookies[settings.SESSION_COOKIE_NAME].value,
        "csrf token": str(csrf),
    }
    stored = {name: value for name, value in secrets.items() if "session" not in name}
    assert (accepted.status_code, signin.status_code, change.status_code) == (302, 302, 302)
    assert leaked(secrets, logs.texts()) == []
    assert leaked(stored, database_text()) == []  # the session store holds its keys


def test_the_operators_commands_that_touch_keys_print_none(
    tenant_a, member_of, mailbox_factory, sandbox, settings
):
    admin = member_of(tenant_a, "admin").user
    mailbox = mailbox_factory(tenant_a)
    _, event_secret = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.approved"], actor=admin
    )
    secrets = {
        "inbox key": mailbox.api_key(),
        "org key": sandbox.org_key,
        "webhook secret": WebhookSecret.objects.get(endpoint__tenant=tenant_a).plaintext(),
        "event secret": event_secret,
        "old ring key": settings.SECRET_ENCRYPTION_KEYS[0],
    }
    new_key = crypto.generate_key("k9")
    settings.SECRET_ENCRYPTION_KEYS = [new_key, *settings.SECRET_ENCRYPTION_KEYS]
    out = io.StringIO()

    with captured_logs() as logs:
        for command, args in [
            ("reencrypt_secrets", []),
            ("agentmail_recover", [tenant_a.slug, "--check"]),
            ("webhooks_backfill", ["--tenant", tenant_a.slug]),
            ("webhooks_apply", ["--once"]),
            ("tenant_suspend", [tenant_a.slug]),
            ("tenant_resume", [tenant_a.slug]),
        ]:
            try:
                call_command(command, *args, stdout=out, stderr=out)
            except CommandError as refusal:  # agentmail_recover: nothing is lost
                out.write(str(refusal))

    secrets["new ring key"] = new_key
    assert leaked(secrets, [out.getvalue(), *logs.texts()]) == []


def test_pages_that_showed_a_secret_once_do_not_show_it_again(
    tenant_a, member_of, mailbox_factory, sandbox, settings, password
):
    admin = member_of(tenant_a, "admin").user
    mailbox = mailbox_factory(tenant_a)
    _, token = token_create(tenant=tenant_a, name="once", scopes=["drafts:read"], actor=admin)
    endpoint, first = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.approved"], actor=admin
    )
    _, second = endpoint_rotate_secret(tenant=tenant_a, endpoint_id=endpoint.pk, actor=admin)
    sso_secret = "sso-client-secret-77c0a3e1"
    oidc_signin.sso_settings_save(
        tenant=tenant_a,
        actor=admin,
        enabled=False,
        issuer="https://idp.example.test",
        client_id="countersign",
        client_secret=sso_secret,
        password_signin_allowed=True,
        domains=["example.test"],
        jit_role="",
    )
    client = Client()
    client.post("/signin/", {"username": admin.email, "password": password})
    seed, recovery = enrol(client)
    base = f"/t/{tenant_a.slug}"
    paths = [
        f"{base}/admin/tokens/",
        f"{base}/admin/agent-events/",
        f"{base}/admin/sign-in/",
        f"{base}/admin/webhooks/",
        f"{base}/admin/audit/",
        f"{base}/admin/audit.csv",
        f"{base}/mailboxes/",
        f"{base}/mailboxes/{mailbox.pk}/",
        "/account/security/",
        "/account/sessions/",
    ]
    pages = {path: client.get(path) for path in paths}

    secrets = {
        "agent token": token,
        "event secret": first,
        "rotated event secret": second,
        "sso secret": sso_secret,
        "totp seed": seed,
        "recovery code": recovery[0],
        "inbox key": mailbox.api_key(),
        "webhook secret": WebhookSecret.objects.get(endpoint__tenant=tenant_a).plaintext(),
        "session id": client.cookies[settings.SESSION_COOKIE_NAME].value,
    }
    assert {path: page.status_code for path, page in pages.items()} == dict.fromkeys(paths, 200)
    assert leaked(secrets, [_text(page) for page in pages.values()]) == []


def _text(page) -> str:
    if page.streaming:  # the audit CSV
        return b"".join(page.streaming_content).decode()
    return page.content.decode()


@pytest.mark.parametrize("mode", ["401_unknown_key", "500_after", "timeout_after_accept"])
def test_agentmail_failing_an_inbox_key_creation_logs_and_stores_no_key(
    tenant_a, member_of, signed_in, sandbox, settings, mode
):
    """The key AgentMail made and whose answer was lost is deleted by the next provisioning; the
    one it answers then is sealed. Neither, nor the organization key, is anywhere else."""
    settings.AGENTMAIL_READ_TIMEOUT = 1
    admin = member_of(tenant_a, "admin").user
    sandbox.fault("create_api_key", mode, times=1, delay=2)

    with captured_logs() as logs:
        with pytest.raises(provisioning.ProvisioningError) as refusal:
            provisioning.mailbox_create(tenant=tenant_a, username="support", actor=admin)
        mailbox = provisioning.mailbox_provision(
            mailbox=Mailbox.objects.get(tenant=tenant_a), actor=admin
        )
        page = signed_in(admin).get(f"/t/{tenant_a.slug}/mailboxes/{mailbox.pk}/")

    texts = [str(refusal.value), page.content.decode(), *logs.texts(), *database_text()]
    assert mailbox.status == Mailbox.Status.ACTIVE
    assert leaked({"inbox key": mailbox.api_key(), "org key": sandbox.org_key}, texts) == []


def _crash(request):
    raise RuntimeError("a bug while handling the form")


urlpatterns = [path("crash/", _crash)]


@pytest.mark.urls(__name__)
def test_a_server_error_shows_and_logs_nothing_of_what_was_posted():
    """Through the whole middleware stack and Django's 500 handler (no template of ours): the
    page is Django's plain one, the log line has the path and the traceback, not the body."""
    typed = "typed-Passphrase-crash-5e07"
    token = "cs_Abcdefgh_" + "x" * 43
    client = Client(raise_request_exception=False)

    with captured_logs() as logs:
        answer = client.post(
            "/crash/?next=/", {"password": typed, "client_secret": token}, HTTP_X_TOKEN=token
        )

    assert answer.status_code == 500
    assert any("RuntimeError: a bug while handling the form" in t for t in logs.texts())
    assert leaked({"password": typed}, [answer.content.decode(), *logs.texts()]) == []
