"""OpenID Connect, the relying party's half: discovery, the authorization request (code flow with
PKCE, state and nonce), the code exchange and the ID token's checks.

Per tenant, so not a settings-based library: httpx for the three HTTP calls, PyJWT for the token
(signature against the issuer's JWKS, ``iss``, ``aud``, ``exp``, ``iat``, ``nonce``). Only
asymmetric algorithms are accepted: an unsigned token (``alg: none``) or one "signed" with the
client secret as an HMAC key is refused. Nothing here touches the database but Django's cache
(the discovery document, ``discover``); callers run it outside any transaction.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import jwt
from django.conf import settings
from django.core.cache import cache
from django.utils.translation import gettext as _

from common.egress import (
    EgressRefused,
    PinnedTransport,
    is_localhost,
    literal_address,
    validate_url,
)
from common.text import control_in

logger = logging.getLogger(__name__)
ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "PS256"]
# Clock skew allowed between us and the identity provider for exp/iat.
LEEWAY_SECONDS = 60
# The longest subject OpenID Connect allows, and the account link's column.
SUBJECT_MAX = 255
TIMEOUT = httpx.Timeout(10.0, connect=5.0)
# The whole of one call, however slowly the provider answers: a person is waiting on the page.
DEADLINE_SECONDS = 15.0
# How long a provider's discovery document is kept, and a failure to get it (``discover``).
DISCOVERY_CACHE_SECONDS = 300
DISCOVERY_FAILURE_CACHE_SECONDS = 10


class OidcError(Exception):
    """``code`` is a stable slug for logs and tests; ``message`` is safe to show."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Provider:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str


@dataclass(frozen=True)
class Flow:
    """What the session keeps between the redirect to the provider and the callback."""

    state: str
    nonce: str
    code_verifier: str

    @property
    def code_challenge(self) -> str:
        digest = hashlib.sha256(self.code_verifier.encode()).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def new_flow() -> Flow:
    return Flow(
        state=secrets.token_urlsafe(32),
        nonce=secrets.token_urlsafe(32),
        code_verifier=secrets.token_urlsafe(64),
    )


def _get_json(client: httpx.Client, url: str, what: str) -> dict[str, Any]:
    try:
        response = client.get(url)
        response.raise_for_status()
        body = response.json()
    except EgressRefused as refused:
        raise _address_refused(refused) from None
    except (httpx.HTTPError, ValueError):
        raise OidcError(
            "provider_unreachable",
            _("The identity provider's %(what)s did not answer.") % {"what": what},
        ) from None
    if not isinstance(body, dict):
        raise OidcError(
            "provider_invalid", _("The identity provider's %(what)s is not valid.") % {"what": what}
        )
    return body


def _client() -> httpx.Client:
    """A tenant admin types the issuer, and the provider names the other two addresses: each
    call resolves its host and connects only to a checked address (common.egress), so neither
    can point the server at its own network or the cloud metadata address."""
    return httpx.Client(
        timeout=TIMEOUT,
        follow_redirects=False,
        transport=PinnedTransport(
            allow_private=settings.SSO_ALLOW_PRIVATE_NETWORKS,
            allow_loopback=settings.EGRESS_ALLOW_LOOPBACK,
            deadline=DEADLINE_SECONDS,
        ),
    )


def _address_refused(refused: EgressRefused) -> OidcError:
    return OidcError(
        "provider_address",
        _("The identity provider's address is not one we connect to: %(why)s")
        % {"why": refused.message},
    )


def checked_url(url: str) -> str:
    """``url`` if the server may call it: https, and no literal internal address; with
    ``SSO_ALLOW_PRIVATE_NETWORKS``, private addresses too; with ``EGRESS_ALLOW_LOOPBACK``,
    loopback, over plain http too (a provider run on this machine: its traffic never leaves
    it). EgressRefused with the reason otherwise (for loopback, that it is loopback, not that
    it is http). A name's addresses are checked when it is called (``_client``)."""
    host = urlsplit(url).hostname or ""
    literal = literal_address(host)
    local = is_localhost(host) or (literal is not None and literal.is_loopback)
    return validate_url(
        url,
        allow_private=settings.SSO_ALLOW_PRIVATE_NETWORKS,
        allow_loopback=settings.EGRESS_ALLOW_LOOPBACK,
        require_https=not local,
    )


def discover(issuer: str) -> Provider:
    """The provider's endpoints from its discovery document, whose issuer must be ``issuer``.

    Kept in the cache for ``DISCOVERY_CACHE_SECONDS``, and a failure for
    ``DISCOVERY_FAILURE_CACHE_SECONDS``: /sso/start/<slug>/ needs no session, and an outside
    probe found that every visit made the server call the tenant's provider, holding a web
    worker up to ``DEADLINE_SECONDS`` when it is slow or down. The addresses are checked against
    the rule of the moment on every use, cached or not."""
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        checked_url(url)  # the issuer was checked when typed; the rule may have tightened since
    except EgressRefused as refused:
        raise _address_refused(refused) from None
    key = "oidc:discovery:" + hashlib.sha256(issuer.encode()).hexdigest()
    kept = cache.get(key)
    if isinstance(kept, tuple) and len(kept) == 2:
        raise OidcError(*kept)
    try:
        provider = kept if isinstance(kept, Provider) else _discovered(issuer, url)
        try:
            checked_url(provider.authorization_endpoint)
            checked_url(provider.token_endpoint)
            checked_url(provider.jwks_uri)
        except EgressRefused as refused:
            raise _address_refused(refused) from None
    except OidcError as error:
        cache.set(key, (error.code, error.message), DISCOVERY_FAILURE_CACHE_SECONDS)
        raise
    if not isinstance(kept, Provider):
        cache.set(key, provider, DISCOVERY_CACHE_SECONDS)
    return provider


def _discovered(issuer: str, url: str) -> Provider:
    """The discovery document at ``url``, fetched."""
    with _client() as client:
        # Translators: fills %(what)s in "The identity provider's %(what)s did not answer."
        meta = _get_json(client, url, _("discovery document"))
    if meta.get("issuer") != issuer:
        raise OidcError("issuer_mismatch", _("The identity provider names another issuer."))
    try:
        provider = Provider(
            issuer=issuer,
            authorization_endpoint=str(meta["authorization_endpoint"]),
            token_endpoint=str(meta["token_endpoint"]),
            jwks_uri=str(meta["jwks_uri"]),
        )
    except KeyError:
        raise OidcError(
            "provider_invalid", _("The identity provider's discovery is incomplete.")
        ) from None
    return provider


def authorization_url(
    provider: Provider, *, client_id: str, redirect_uri: str, flow: Flow, again: bool = False
) -> str:
    """``again``: the person must sign in at the provider now, not ride on its session
    (``prompt=login``, ``max_age=0``; the token then carries ``auth_time``, see ``signed_in_since``)."""
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": "openid email profile",
        "state": flow.state,
        "nonce": flow.nonce,
        "code_challenge": flow.code_challenge,
        "code_challenge_method": "S256",
    }
    if again:
        params |= {"prompt": "login", "max_age": "0"}
    return f"{provider.authorization_endpoint}?{urlencode(params)}"


# How far the provider's clock may be behind ours when it says when the person signed in.
AUTH_TIME_SKEW_SECONDS = 60


def signed_in_since(claims: dict, since: float) -> bool:
    """Whether the token says the person signed in at the provider after ``since`` (a Unix
    time). A provider that ignored ``max_age`` and sent no ``auth_time``, or an old one, rode on
    its own session: no proof that the person is at the keyboard now."""
    auth_time = claims.get("auth_time")
    if isinstance(auth_time, bool) or not isinstance(auth_time, int | float):
        return False
    return auth_time >= since - AUTH_TIME_SKEW_SECONDS


def exchange_code(
    provider: Provider,
    *,
    client_id: str,
    client_secret: str,
    code: str,
    redirect_uri: str,
    flow: Flow,
) -> str:
    """The ID token the token endpoint returns for ``code`` (client_secret_basic)."""
    with _client() as client:
        try:
            response = client.post(
                provider.token_endpoint,
                data={
                    "grant_type": "authorization_code",
                    "code": code,
                    "redirect_uri": redirect_uri,
                    "code_verifier": flow.code_verifier,
                },
                auth=(client_id, client_secret),
                headers={"Accept": "application/json"},
            )
        except EgressRefused as refused:
            raise _address_refused(refused) from None
        except httpx.HTTPError:
            raise OidcError(
                "provider_unreachable", _("The identity provider did not answer.")
            ) from None
    if response.status_code != 200:
        raise OidcError("code_refused", _("The identity provider refused the sign-in code."))
    try:
        id_token = response.json()["id_token"]
    except (ValueError, KeyError, TypeError):
        raise OidcError("no_id_token", _("The identity provider sent no ID token.")) from None
    return str(id_token)


def fetch_jwks(provider: Provider) -> dict[str, Any]:
    with _client() as client:
        # Translators: fills %(what)s in "The identity provider's %(what)s did not answer."
        return _get_json(client, provider.jwks_uri, _("key set"))


def verify_id_token(
    id_token: str, *, jwks: dict[str, Any], issuer: str, client_id: str, nonce: str
) -> dict[str, Any]:
    """The token's claims if it is signed by one of the issuer's keys, for us, by that issuer,
    current, and for this sign-in (nonce); OidcError otherwise."""
    try:
        header = jwt.get_unverified_header(id_token)
    except jwt.PyJWTError:
        raise OidcError("token_malformed", _("The ID token is not a valid token.")) from None
    if header.get("alg") not in ALGORITHMS:
        raise OidcError(
            "token_unsigned", _("The ID token is not signed with an accepted algorithm.")
        )
    try:
        keys = jwt.PyJWKSet.from_dict(jwks)
        candidates = [k for k in keys.keys if header.get("kid") in (None, k.key_id)]
    except jwt.PyJWTError:
        raise OidcError(
            "provider_invalid", _("The identity provider's key set is not valid.")
        ) from None
    if not candidates:
        raise OidcError("token_unknown_key", _("The ID token is signed with an unknown key."))
    try:
        claims = jwt.decode(
            id_token,
            key=candidates[0],
            algorithms=ALGORITHMS,
            audience=client_id,
            issuer=issuer,
            leeway=LEEWAY_SECONDS,
            options={"require": ["iss", "aud", "exp", "iat", "sub"]},
        )
    except jwt.ExpiredSignatureError:
        raise OidcError("token_expired", _("The ID token has expired.")) from None
    except jwt.InvalidAudienceError:
        raise OidcError(
            "token_audience", _("The ID token is meant for another application.")
        ) from None
    except jwt.InvalidIssuerError:
        raise OidcError("token_issuer", _("The ID token comes from another issuer.")) from None
    except jwt.PyJWTError as error:
        logger.info(
            "tenants.sso.token_invalid", extra={"error": f"{type(error).__name__}: {error}"}
        )
        raise OidcError(
            "token_invalid", _("The ID token's signature or claims are not valid.")
        ) from None
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != client_id:
        raise OidcError("token_audience", _("The ID token is meant for another application."))
    if not secrets.compare_digest(str(claims.get("nonce", "")), nonce):
        raise OidcError("token_nonce", _("The ID token belongs to another sign-in."))
    # The account's link holds the subject (OpenID Connect Core 1.0 §2: at most 255 ASCII
    # characters): a NUL or a longer one was a 500 after a good sign-in, and an empty one
    # linked the account to whatever token of the provider names no one.
    subject = claims["sub"]
    if not isinstance(subject, str) or not 0 < len(subject) <= SUBJECT_MAX or control_in(subject):
        raise OidcError("token_subject", _("The ID token does not name a valid subject."))
    return claims
