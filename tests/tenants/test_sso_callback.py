"""The single sign-on callback end to end through our views, against a provider served on
loopback by this test (discovery, JWKS and token endpoint over real HTTP) that hands back the ID
token each case needs: the good one signs the member in; another audience, a wrong issuer, an
expired or unsigned token and an address outside the tenant's domains are refused and audited.
(The real provider and a browser: tests/ui/test_browser_sso.py.)"""

import base64
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.core.cache import cache
from django.urls import reverse

from common.egress import EgressRefused
from tenants import invitations, oidc, oidc_signin
from tenants.models import AuditEvent, Membership, SingleSignOn, User
from tenants.views_sso import FLOW_KEY

CLIENT = "countersign"


class Provider:
    def __init__(self):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.jwks = {"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}
        self.id_token = ""
        self.token_requests = []
        self.gets = []
        self.discovery_overrides = {}
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, body):
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                provider.gets.append(self.path)
                if self.path == "/.well-known/openid-configuration":
                    self._send(
                        {
                            "issuer": provider.issuer,
                            "authorization_endpoint": f"{provider.issuer}/authorize",
                            "token_endpoint": f"{provider.issuer}/token",
                            "jwks_uri": f"{provider.issuer}/jwks",
                            **provider.discovery_overrides,
                        }
                    )
                elif self.path == "/jwks":
                    self._send(provider.jwks)
                else:
                    self.send_error(404)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                provider.token_requests.append(
                    (self.headers.get("Authorization"), self.rfile.read(length).decode())
                )
                self._send(
                    {"access_token": "at", "token_type": "Bearer", "id_token": provider.id_token}
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def sign(self, nonce, **overrides):
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": CLIENT,
            "sub": "subject-1",
            "iat": now,
            "exp": now + 300,
            "nonce": nonce,
            "email": "alice@acme.test",
            "email_verified": True,
            **overrides,
        }
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "k1"})


@pytest.fixture
def provider():
    served = Provider()
    yield served
    served.server.shutdown()


@pytest.fixture
def alice(db, tenant_a, member_of, provider):
    oidc_signin.sso_settings_save(
        tenant=tenant_a,
        actor=member_of(tenant_a, "admin").user,
        enabled=True,
        issuer=provider.issuer,
        client_id=CLIENT,
        client_secret="client-secret-at-the-provider",
        password_signin_allowed=False,
        domains=["acme.test"],
        jit_role="",
    )
    return member_of(tenant_a, "approver", user__email="alice@acme.test").user


def start(client, tenant):
    response = client.get(reverse("sso_start", args=[tenant.slug]))
    assert response.status_code == 302
    flow = client.session[FLOW_KEY]
    assert "code_challenge_method=S256" in response["Location"]
    assert f"state={flow['state']}" in response["Location"]
    return flow


def unsigned(token):
    _, payload, _ = token.split(".")
    header = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
    return f"{header}.{payload}."


def test_the_good_token_signs_the_member_in_through_the_views(client, provider, alice, tenant_a):
    flow = start(client, tenant_a)
    provider.id_token = provider.sign(flow["nonce"])
    response = client.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})
    assert response.status_code == 302
    assert response["Location"] == reverse("tenant_home", args=[tenant_a.slug])
    assert client.get(response["Location"]).status_code == 200
    auth, body = provider.token_requests[-1]
    expected = base64.b64encode(f"{CLIENT}:client-secret-at-the-provider".encode()).decode()
    assert auth == f"Basic {expected}"
    assert f"code_verifier={flow['verifier']}" in body
    # The state is spent: the same callback again is refused.
    again = client.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})
    assert again.status_code == 400


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p, n: p.sign(n, aud="another-app"), "token_audience"),
        (lambda p, n: p.sign(n, iss="https://impostor.test"), "token_issuer"),
        (
            lambda p, n: p.sign(n, exp=int(time.time()) - 600, iat=int(time.time()) - 900),
            "token_expired",
        ),
        (lambda p, n: unsigned(p.sign(n)), "token_unsigned"),
        (lambda p, n: p.sign("another-sign-in"), "token_nonce"),
        (lambda p, n: p.sign(n, email="eve@elsewhere.test", sub="eve"), "domain_not_allowed"),
    ],
    ids=["audience", "issuer", "expired", "unsigned", "nonce", "domain"],
)
def test_bad_tokens_are_refused_and_audited(client, provider, alice, tenant_a, make, reason):
    flow = start(client, tenant_a)
    provider.id_token = make(provider, flow["nonce"])
    response = client.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})
    assert response.status_code == 403
    assert "_auth_user_id" not in client.session
    row = AuditEvent.objects.get(action="signin.sso_refused", tenant=tenant_a)
    assert row.data["reason"] == reason


def test_a_member_of_two_tenants_signs_in_once_per_tenants_rule(
    client, provider, alice, tenant_a, tenant_b, member_of, password
):
    member_of(tenant_b, "viewer", user=alice)
    client.post(reverse("login"), {"username": alice.email, "password": password})
    assert client.get(reverse("tenant_home", args=[tenant_b.slug])).status_code == 200
    outbox_a = reverse("outbox", args=[tenant_a.slug])
    sent = client.get(outbox_a)
    assert sent.status_code == 302
    assert client.get(sent["Location"]).status_code == 302
    flow = client.session[FLOW_KEY]
    assert flow["next"] == outbox_a
    provider.id_token = provider.sign(flow["nonce"])
    back = client.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})
    assert back.status_code == 302 and back["Location"] == outbox_a
    assert client.get(outbox_a).status_code == 200
    # The password sign-in still stands for the tenant that accepts it.
    assert client.get(reverse("tenant_home", args=[tenant_b.slug])).status_code == 200


@pytest.mark.parametrize(
    ("given", "kept"),
    [("http://testserver/preferences/", ""), ("/preferences/", "/preferences/")],
    ids=["plain-http", "path"],
)
def test_a_sign_in_begun_over_https_never_returns_over_http(
    client, provider, alice, tenant_a, given, kept
):
    """Django's own sign-in refuses a plain-http "next" on a secure request (require_https); the
    single sign-on start kept it, and the callback redirected there after a good sign-in."""
    started = client.get(reverse("sso_start", args=[tenant_a.slug]), {"next": given}, secure=True)
    assert started.status_code == 302
    flow = client.session[FLOW_KEY]
    assert flow["next"] == kept
    provider.id_token = provider.sign(flow["nonce"])
    back = client.get(
        reverse("sso_callback"), {"state": flow["state"], "code": "c0de"}, secure=True
    )
    assert back.status_code == 302
    assert back["Location"] == (kept or reverse("tenant_home", args=[tenant_a.slug]))


@pytest.mark.parametrize("given", ["foo", "tenant_home", "%C3%A9"])
def test_a_next_that_is_no_path_returns_to_the_tenant_not_a_500(
    client, provider, alice, tenant_a, given
):
    """Found by an outside probe: redirect() took ?next=foo for a view name to reverse, and the
    callback answered 500 right after a good sign-in."""
    started = client.get(reverse("sso_start", args=[tenant_a.slug]) + "?next=" + given)
    assert started.status_code == 302
    flow = client.session[FLOW_KEY]
    provider.id_token = provider.sign(flow["nonce"])

    back = client.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})

    assert back.status_code == 302
    assert back["Location"] == reverse("tenant_home", args=[tenant_a.slug])


def test_without_private_networks_a_provider_on_loopback_is_never_called(
    client, provider, alice, tenant_a, settings
):
    """Production's default: the issuer a tenant admin typed may not point the server at its
    own network (checked after resolution, so a name that answers 127.0.0.1 is refused too)."""
    settings.SSO_ALLOW_PRIVATE_NETWORKS = False
    settings.EGRESS_ALLOW_LOOPBACK = False
    response = client.get(reverse("sso_start", args=[tenant_a.slug]))
    assert response.status_code == 502
    assert "not one we connect to" in response.content.decode()
    assert provider.gets == []
    # An https name passes the typed check; its address is refused when it is resolved.
    SingleSignOn.objects.filter(tenant=tenant_a).update(
        issuer=provider.issuer.replace("http://127.0.0.1", "https://localhost")
    )
    named = client.get(reverse("sso_start", args=[tenant_a.slug]))
    assert named.status_code == 502 and provider.gets == []
    assert "not one we connect to" in named.content.decode()


LOOPBACK_SAID = "(this server itself): it is reached only with EGRESS_ALLOW_LOOPBACK on."


@pytest.mark.parametrize(
    ("issuer", "said"),
    [
        ("http://127.0.0.1", "127.0.0.1 is a loopback address"),
        ("https://idp.internal.test", "idp.internal.test resolves to a loopback address"),
    ],
)
def test_with_private_networks_allowed_a_provider_on_loopback_is_never_called(
    client, provider, alice, tenant_a, settings, monkeypatch, issuer, said
):
    """A self-hosted production deployment opens its own network to identity providers; not the
    deployment host itself (its /metrics, redis, pgbouncer, PostgreSQL), whatever a tenant admin
    typed as the issuer, nor a name that resolves to it."""
    real = socket.getaddrinfo

    def resolve(host, port, *args, **kwargs):
        if host == "idp.internal.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    settings.SSO_ALLOW_PRIVATE_NETWORKS = True
    settings.EGRESS_ALLOW_LOOPBACK = False
    SingleSignOn.objects.filter(tenant=tenant_a).update(
        issuer=provider.issuer.replace("http://127.0.0.1", issuer)
    )

    response = client.get(reverse("sso_start", args=[tenant_a.slug]))

    assert response.status_code == 502
    assert f"{said} {LOOPBACK_SAID}" in response.content.decode()
    assert provider.gets == []


@pytest.mark.parametrize("field", ["jwks_uri", "token_endpoint", "authorization_endpoint"])
def test_a_discovery_document_naming_the_metadata_address_is_refused(
    client, provider, alice, tenant_a, field
):
    """The provider names its key set and token addresses; the cloud metadata address is
    refused even where private networks are allowed."""
    provider.discovery_overrides = {field: "https://169.254.169.254/latest/meta-data/"}
    response = client.get(reverse("sso_start", args=[tenant_a.slug]))
    assert response.status_code == 502
    assert "169.254.169.254 is never a delivery address" in response.content.decode()
    assert provider.gets == ["/.well-known/openid-configuration"]
    assert FLOW_KEY not in client.session


@pytest.mark.parametrize(
    ("allow", "loopback", "url", "refusal"),
    [
        (False, False, "https://login.acme.test/realms/acme", None),
        (False, False, "http://login.acme.test/", "must use https"),
        (False, False, "http://127.0.0.1:8080", f"127.0.0.1 is a loopback address {LOOPBACK_SAID}"),
        (False, False, "https://127.0.0.1:8443", "loopback"),
        (False, False, "https://10.1.2.3/", "not a public address"),
        (True, False, "http://127.0.0.1:8080", f"127.0.0.1 is a loopback address {LOOPBACK_SAID}"),
        (True, False, "https://127.0.0.1:8443", f"127.0.0.1 is a loopback address {LOOPBACK_SAID}"),
        (True, False, "https://[::1]:8443", f"::1 is a loopback address {LOOPBACK_SAID}"),
        (
            True,
            False,
            "https://localhost/",
            f"localhost resolves to a loopback address {LOOPBACK_SAID}",
        ),
        (True, False, "https://10.1.2.3/", None),
        (True, True, "http://127.0.0.1:8080", None),
        (True, True, "http://localhost:8080", None),
        (False, True, "http://127.0.0.1:8080", None),
        (False, True, "https://10.1.2.3/", "not a public address"),
        (True, True, "http://10.1.2.3/", "must use https"),
        (True, True, "https://169.254.169.254/", "never a delivery address"),
        (True, True, "https://user:pw@login.acme.test/", "user name or password"),
    ],
)
def test_the_addresses_the_server_may_call(settings, allow, loopback, url, refusal):
    settings.SSO_ALLOW_PRIVATE_NETWORKS = allow
    settings.EGRESS_ALLOW_LOOPBACK = loopback
    if refusal is None:
        assert oidc.checked_url(url) == url
    else:
        with pytest.raises(EgressRefused, match=re.escape(refusal)):
            oidc.checked_url(url)


@pytest.mark.django_db
@pytest.mark.parametrize("typed", ["a\x00b", "a b", "../admin", "ä"])
def test_a_tenant_address_that_is_no_slug_names_no_tenant(client, typed):
    """A NUL reached the query and PostgreSQL refused it: a 500 before anyone signed in."""
    response = client.get(reverse("sso_choose"), {"tenant": typed})

    assert response.status_code == 404
    assert "No tenant with that address uses single sign-on." in response.content.decode()


def test_sign_in_pages_visited_again_and_again_ask_the_provider_once(
    client, provider, alice, tenant_a
):
    """Found by an outside probe: /sso/start/<slug>/ needs no session, and every visit made the
    server fetch the provider's discovery document (up to 15 s of a web worker when the provider
    is slow or down). It is kept for a while, and so is a failure to get it."""
    for _ in range(5):
        assert client.get(reverse("sso_start", args=[tenant_a.slug])).status_code == 302
    assert provider.gets == ["/.well-known/openid-configuration"]


def test_a_provider_that_does_not_answer_is_asked_again_only_after_a_pause(
    client, provider, alice, tenant_a
):
    provider.discovery_overrides = {"issuer": "https://somebody-else.test"}
    url = reverse("sso_start", args=[tenant_a.slug])
    answers = [client.get(url).status_code for _ in range(4)]
    assert answers == [502] * 4
    assert provider.gets == ["/.well-known/openid-configuration"]

    cache.clear()  # the pause (DISCOVERY_FAILURE_CACHE_SECONDS) is over
    provider.discovery_overrides = {}
    assert client.get(url).status_code == 302
    assert len(provider.gets) == 2


def test_a_newcomer_who_joins_through_sso_closes_their_pending_invitation(
    client, provider, alice, tenant_a, tenant_b, member_of
):
    """Found by the membership races probe: an invitee who joined through single sign-on
    (a new account, made a member by the provider) left their invitation pending until it
    expired: it could no longer be taken up, but the admins saw it waiting on the members
    page. It is revoked in the transaction that makes the member, audited with why; another
    tenant's invitation to the same address is that tenant's business and stays open."""
    admin = member_of(tenant_a, "admin").user
    oidc_signin.sso_settings_save(
        tenant=tenant_a,
        actor=admin,
        enabled=True,
        issuer=provider.issuer,
        client_id=CLIENT,
        client_secret="",
        password_signin_allowed=True,
        domains=["acme.test"],
        jit_role="viewer",
    )
    invited, _ = invitations.invitation_create(
        tenant=tenant_a, email="newbie@acme.test", role="approver", actor=admin
    )
    elsewhere, _ = invitations.invitation_create(
        tenant=tenant_b,
        email="newbie@acme.test",
        role="viewer",
        actor=member_of(tenant_b, "admin").user,
    )
    flow = start(client, tenant_a)
    provider.id_token = provider.sign(flow["nonce"], sub="newbie-1", email="newbie@acme.test")
    response = client.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})
    assert response.status_code == 302
    newbie = User.objects.get(email="newbie@acme.test")
    assert Membership.objects.get(tenant=tenant_a, user=newbie).role == "viewer"
    invited.refresh_from_db()
    elsewhere.refresh_from_db()
    assert (invited.state, elsewhere.state) == ("revoked", "pending")
    assert invited.closed_at is not None and invited.closed_by is None
    row = AuditEvent.objects.get(action="invitation.revoked", tenant=tenant_a)
    assert (row.actor, row.object_id) == (None, str(invited.pk))
    assert row.data == {"email": "newbie@acme.test", "reason": "joined_by_sso"}
    assert not AuditEvent.objects.filter(action="invitation.revoked", tenant=tenant_b).exists()
    client.force_login(admin)
    members = client.get(reverse("admin_members", args=[tenant_a.slug]))
    audit = client.get(reverse("admin_audit", args=[tenant_a.slug]))
    assert (members.status_code, audit.status_code) == (200, 200)
    assert f'data-invitation="{invited.pk}"' in members.content.decode()
    assert "pending until" not in members.content.decode()
    assert "joined through single sign-on" in audit.content.decode()


@pytest.mark.parametrize(
    ("email", "shown"),
    [
        ("al\u202eice@acme.test", "al[U+202E]ice@acme.test"),
        ("ali\u200bce@acme.test", "ali[U+200B]ce@acme.test"),
        ("a\x00lice@acme.test", "a[U+0000]lice@acme.test"),
    ],
    ids=["right-to-left-override", "zero-width-space", "nul"],
)
def test_an_address_from_the_provider_with_unseen_characters_is_refused_and_audited(
    client, provider, alice, tenant_a, member_of, email, shown
):
    """Found by an outside probe: the provider's address was taken as it came, though its name
    claim is cleaned (``_readable_name``). A new member's address is their name to every
    colleague when the provider sends none; one with U+202E read reversed on the queue, the
    journal and the audit log, one with U+200B looked like a colleague's, and a NUL was a 500
    (PostgreSQL refuses it). Refused, audited with the address as the admin can read it."""
    SingleSignOn.objects.filter(tenant=tenant_a).update(jit_role="approver")
    flow = start(client, tenant_a)
    provider.id_token = provider.sign(flow["nonce"], sub="newcomer-1", email=email, name="")
    response = client.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})
    assert response.status_code == 403
    assert "_auth_user_id" not in client.session
    assert not User.objects.exclude(pk=alice.pk).filter(email__contains="ce@acme.test").exists()
    row = AuditEvent.objects.get(action="signin.sso_refused", tenant=tenant_a)
    assert row.data == {"reason": "email_unseen_character", "email": shown}


@pytest.mark.parametrize("subject", ["alice\x00", "a" * 256, ""], ids=["nul", "too-long", "empty"])
def test_a_subject_the_account_link_cannot_hold_is_refused_and_audited(
    client, provider, alice, tenant_a, subject
):
    """Found by an outside probe: the ID token's ``sub`` was stored as it came as the link to
    the account (255 characters at most, as OpenID Connect Core 1.0 §2 allows): a NUL or a
    longer subject was a 500 from the database, after a sign-in that verified."""
    flow = start(client, tenant_a)
    provider.id_token = provider.sign(flow["nonce"], sub=subject)
    response = client.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})
    assert response.status_code == 403
    assert "_auth_user_id" not in client.session
    row = AuditEvent.objects.get(action="signin.sso_refused", tenant=tenant_a)
    assert row.data["reason"] == "token_subject"
