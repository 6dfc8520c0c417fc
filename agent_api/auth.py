"""Who is calling the agent API, and may they: bearer token, scope, rate limit, body shape.

These checks run before ninja parses the body, in this order: token (401), suspended tenant and
scope (403), rate limit (429), body size (413) and media type (415). A request refused here never
reaches the idempotency layer, so it consumes no Idempotency-Key.
"""

from __future__ import annotations

import logging
import math
from typing import cast

from django.conf import settings
from django.db import connection
from django.http import HttpRequest
from ninja.security import HttpBearer

from agent_api.errors import ApiProblem
from intents.models import ApiRateWindow
from tenants.models import AgentToken
from tenants.tokens import token_authenticate

# Logger and event names are the ones from before the API became its own app: alerts match them.
log = logging.getLogger("intents.api")

# A draft's text and the attachments it may carry, in base64 (settings, "Request bodies").
MAX_BODY_BYTES = settings.API_BODY_MAX_BYTES
RATE_WINDOW_SECONDS = 60
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH"})
JSON_TYPES = frozenset({"application/json"})
UTF8_NAMES = frozenset({"utf-8", "utf8"})


class AgentRequest(HttpRequest):
    """The request an agent API operation receives (for type checking only; never built).

    ninja sets ``auth`` to what the operation's :class:`TokenAuth` returned, a live token (a
    request without one was answered 401 before the operation ran); TokenAuth also sets
    ``agent_token``.
    """

    auth: AgentToken
    agent_token: AgentToken


def rate_limit_per_window() -> int:
    return int(settings.API_RATE_LIMIT_PER_MINUTE)


# One request more in the token's current minute (the database clock's), counted atomically:
# the row is created or incremented in one statement, under its row lock. Returns the count and
# the seconds left in the window.
_COUNT = """
INSERT INTO {table} AS w (token_id, window_start, count)
VALUES (%s, to_timestamp(floor(extract(epoch FROM statement_timestamp()) / {seconds}) * {seconds}), 1)
ON CONFLICT (token_id, window_start) DO UPDATE SET count = w.count + 1
RETURNING w.count,
          extract(epoch FROM w.window_start + make_interval(secs => {seconds})
                             - statement_timestamp())
"""


def _count_request(token_id: int) -> tuple[int, float]:
    table = connection.ops.quote_name(ApiRateWindow._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(_COUNT.format(table=table, seconds=RATE_WINDOW_SECONDS), [token_id])
        count, left = cursor.fetchone()
    return int(count), float(left)


def check_rate_limit(token: AgentToken) -> None:
    check_request_rate(token_id=token.pk, tenant_id=token.tenant_id)


def check_request_rate(*, token_id: int, tenant_id: int) -> None:
    """One request more for the token: a fixed one-minute window per token, counted in the
    database (``ApiRateWindow``): one budget per token across every web and MCP process, and
    exact under concurrent requests (Django's database cache increments by a read and a write,
    which concurrent requests overwrote: 30 requests at once all passed a limit of 5)."""
    limit = rate_limit_per_window()
    count, left = _count_request(token_id)
    if count > limit:
        retry_after = max(1, math.ceil(left))
        log.info(
            "intents.api.rate_limited",
            extra={"token_id": token_id, "tenant_id": tenant_id, "limit": limit},
        )
        raise ApiProblem(
            429,
            "rate_limited",
            f"This token may make {limit} requests per minute; retry after {retry_after} s.",
            title="Too many requests",
            headers={"Retry-After": str(retry_after)},
        )


def body_too_large() -> ApiProblem:
    return ApiProblem(
        413,
        "body_too_large",
        f"The request body is larger than {MAX_BODY_BYTES // 1024} KiB.",
        title="Request body too large",
    )


def length_required() -> ApiProblem:
    return ApiProblem(
        411,
        "length_required",
        "Send the request with its Content-Length; a body without one (chunked) is not read.",
        title="Length required",
    )


def bad_content_length() -> ApiProblem:
    return ApiProblem(
        400,
        "bad_content_length",
        "Content-Length must be a number of bytes (digits only).",
        title="Bad Content-Length",
    )


def check_body(request: HttpRequest) -> None:
    if request.method not in WRITE_METHODS:
        return
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    # Refuse on the declared length before reading anything (config.request_body has already
    # refused such a request; this stays for a handler that runs the API without it).
    if declared > MAX_BODY_BYTES:
        raise body_too_large()
    body = request.body
    if len(body) > MAX_BODY_BYTES:
        raise body_too_large()
    if body and request.content_type not in JSON_TYPES:
        raise ApiProblem(
            415,
            "unsupported_media_type",
            "Send the body as JSON with 'Content-Type: application/json'.",
            title="Unsupported media type",
        )
    charset = (request.content_params or {}).get("charset")
    if body and charset is not None and charset.strip().lower() not in UTF8_NAMES:
        # The body is read as UTF-8 whatever the header says: a Latin-1 'Ã©' would be stored
        # as 'é', so another charset is refused rather than read as something else.
        raise ApiProblem(
            415,
            "unsupported_media_type",
            "JSON bodies are read as UTF-8 only: send 'Content-Type: application/json' "
            "(or with 'charset=utf-8') and a UTF-8 body.",
            title="Unsupported media type",
        )


def refuse_body(request: HttpRequest) -> None:
    """For a route that takes no body: nothing, whitespace or ``{}`` only (nothing else is read,
    so a body there is a client's mistake, and it must not be taken as one that was used)."""
    if request.body.strip() not in (b"", b"{}"):
        raise ApiProblem(
            422,
            "body_not_allowed",
            "This route takes no request body; send none.",
            title="Unexpected request body",
            errors=[{"field": None, "message": "no body expected"}],
        )


# What a route that reads no query string allows: every route calls ``refuse_unknown_query``.
NO_QUERY: frozenset[str] = frozenset()


def refuse_unknown_query(request: HttpRequest, allowed: frozenset[str]) -> None:
    """Query parameters the route does not take are refused, as unknown body fields are: a
    misspelt filter (``?state=pending``) was ignored and the agent got every draft, decided
    ones included, as if they were the ones it asked for; on a write, ``POST /drafts?dry_run=
    true`` posted a real draft for review. A parameter given twice is refused too. Called
    first in every route, before any work."""
    unknown = sorted(set(request.GET) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed)) or "none"
        errors = [
            {"field": name, "message": f"unknown query parameter; this route takes: {takes}"}
            for name in unknown
        ]
        raise ApiProblem(
            422,
            "validation_failed",
            f"{unknown[0]}: unknown query parameter; this route takes: {takes}",
            title="The request is not valid",
            errors=errors,
        )
    # One value each: of "?limit=1&limit=2" the route read one, silently (the agent could
    # not know which it got).
    repeated = sorted(name for name in request.GET if len(request.GET.getlist(name)) > 1)
    if repeated:
        raise ApiProblem(
            422,
            "validation_failed",
            f"{repeated[0]}: a query parameter given more than once; give it once",
            title="The request is not valid",
            errors=[
                {"field": name, "message": "a query parameter given more than once; give it once"}
                for name in repeated
            ],
        )


class AgentTokenAuth(HttpBearer):
    """``Authorization: Bearer cs_…`` and nothing else: a session cookie is not a credential here
    (agents would otherwise inherit a person's rights, and CSRF would matter)."""

    def __init__(self, scope: str):
        super().__init__()
        self.scope = scope

    def __call__(self, request: HttpRequest) -> AgentToken | None:
        scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not raw.strip():
            return None
        return self.authenticate(request, raw.strip())

    def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        agent_token = token_authenticate(token)
        if agent_token is None:
            log.info("intents.api.auth_failed", extra={"path": request.path})
            return None
        cast(AgentRequest, request).agent_token = agent_token
        check_token(agent_token, self.scope)
        check_body(request)
        return agent_token


def tenant_suspended() -> ApiProblem:
    """403 for a token whose tenant is suspended: every route, tool call and tool listing."""
    return ApiProblem(
        403,
        "tenant_suspended",
        "This tenant is suspended; the API is closed for it.",
        title="Tenant suspended",
    )


def check_token(agent_token: AgentToken, scope: str, *, count: bool = True) -> None:
    """What an authenticated token may do, for the JSON API and the MCP tools alike: its tenant
    is active (403), it holds ``scope`` (403), it is within its rate (429; unless ``count`` is
    False, for a tool call whose HTTP request the MCP server has already counted)."""
    if not agent_token.tenant.is_active:
        raise tenant_suspended()
    if scope not in agent_token.scopes:
        raise ApiProblem(
            403,
            "insufficient_scope",
            f"This token lacks the scope '{scope}'.",
            title="Insufficient scope",
            headers={
                "WWW-Authenticate": (
                    f'Bearer realm="countersign", error="insufficient_scope", scope="{scope}"'
                )
            },
        )
    if count:
        check_rate_limit(agent_token)


DRAFTS_READ = AgentTokenAuth(AgentToken.Scope.DRAFTS_READ)
DRAFTS_WRITE = AgentTokenAuth(AgentToken.Scope.DRAFTS_WRITE)
