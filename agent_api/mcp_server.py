"""The MCP server at ``/mcp/``: the official ``mcp`` SDK over streamable HTTP, with the tools of
``mcp_tools.py`` and the agent API's bearer tokens.

Built on the SDK's low-level ``Server`` rather than its ``MCPServer`` (formerly FastMCP):
``MCPServer`` derives a tool's arguments from the function's signature and drops unknown ones,
so a misspelt ``bcc`` would silently lose recipients; the low-level server lets each tool publish
and enforce the JSON API's own request schema (unknown fields refused) and answer the API's
problem documents. The SDK still does the protocol, the transport, the body limit, the Host and
Origin checks and the bearer authentication (its ``TokenVerifier`` hook: no token, a malformed,
unknown, expired or revoked one is a 401 with ``WWW-Authenticate`` before any MCP message is read).

Stateless, with JSON responses: each POST carries its token and is authenticated on its own, and
no session lives in one process, so any web process behind the load balancer answers any request
(no sticky sessions, no event store), and a revoked token stops working on its next request. No
tool streams or asks the client anything back, so server-sent events would add nothing.

Tools run Django code in a small thread pool per process (``MCP_THREADS``), so the database
connections an MCP process holds stay bounded and are reused like a WSGI worker's
(``close_old_connections`` around each call, as Django does around a request).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import mcp_types as types
from django.conf import settings
from django.db import close_old_connections
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware

from agent_api.auth import MAX_BODY_BYTES, check_request_rate, tenant_suspended
from agent_api.errors import ApiProblem, problem_of
from agent_api.idempotency import token_credential
from agent_api.mcp_shape import FORBIDDEN, App, Scope, body_guard, refuse_rate_limited
from agent_api.mcp_tools import TOOLS, ToolAnswer, call_tool
from config.perprocess import PerProcess
from tenants.tokens import token_authenticate

log = logging.getLogger("agent_api.mcp")

PATH = "/mcp/"
REPLAYED_META = "countersign/idempotent-replayed"
INSTRUCTIONS = (
    "Countersign: post draft replies to customer email for a person to approve. Nothing you "
    "post is sent until a person approves it; no tool approves or sends. Use list_mailboxes, "
    "then create_draft; follow a draft with get_draft (status, reject reason, delivery). One "
    "message to many customers is a broadcast: create_broadcast, then get_broadcast."
)

_executor = PerProcess(
    lambda: ThreadPoolExecutor(max_workers=settings.MCP_THREADS, thread_name_prefix="mcp")
)


def _with_django(fn: Callable[..., Any], kwargs: dict) -> Any:
    close_old_connections()
    try:
        return fn(**kwargs)
    finally:
        close_old_connections()


async def in_django_thread(fn: Callable[..., Any], **kwargs: Any) -> Any:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor.get(), partial(_with_django, fn, kwargs))


class AgentTokenVerifier:
    """The SDK's per-request auth hook: the agent API's own token check (``token_authenticate``)."""

    async def verify_token(self, token: str) -> AccessToken | None:
        agent_token = await in_django_thread(token_authenticate, raw=token)
        if agent_token is None:
            log.info("agent_api.mcp.auth_failed")
            return None
        expires_at = agent_token.expires_at
        return AccessToken(
            token=token,
            client_id=token_credential(agent_token),
            scopes=list(agent_token.scopes),
            expires_at=int(expires_at.timestamp()) if expires_at else None,
            # What ``rate_guard`` counts the request against, without a second look-up.
            claims={
                "token_id": agent_token.pk,
                "tenant_id": agent_token.tenant_id,
                "tenant_active": agent_token.tenant.is_active,
            },
        )


def request_rate_problem(*, token_id: int, tenant_id: int) -> dict | None:
    """Counts one request for the token: None within its rate, else the API's 429 problem
    document with ``retry_after`` (seconds)."""
    try:
        check_request_rate(token_id=token_id, tenant_id=tenant_id)
    except ApiProblem as exc:
        return {**problem_of(exc), "retry_after": int(exc.headers["Retry-After"])}
    return None


def rate_guard(app: App) -> App:
    """``app`` behind the rate limit, for a request whose bearer token the SDK's authentication
    accepted (it runs after it, and before ``body_guard`` reads anything): every request counts,
    whatever its method, as every JSON API request does, and one over the limit is 429 unread.
    Only tool calls were counted, after their body had been parsed: a token could post 4.5 MB
    pings, ``tools/list`` or ``initialize`` without end, each read and parsed (about 0.4 s) on
    the event loop every tenant's agents share, and another tenant's call waited seconds."""

    async def guarded(scope: Scope, receive, send) -> None:
        user = scope.get("user") if scope["type"] == "http" else None
        if not isinstance(user, AuthenticatedUser):
            await app(scope, receive, send)
            return
        claims = user.access_token.claims or {}
        problem = await in_django_thread(
            request_rate_problem, token_id=claims["token_id"], tenant_id=claims["tenant_id"]
        )
        if problem is not None:
            await refuse_rate_limited(send, problem)
            return
        await app(scope, receive, send)

    return guarded


def _tool(spec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.arguments.model_json_schema(),
        annotations=spec.annotations,
    )


TOOL_LIST = [(spec.scope, _tool(spec)) for spec in TOOLS.values()]


def _text(answer: ToolAnswer) -> str:
    document = answer.document
    if not answer.is_error:
        return json.dumps(document, ensure_ascii=False)
    fields = "; ".join(
        f"{e['field']}: {e['message']}" for e in document["errors"] if e.get("field")
    )
    text = f"{document['title']} ({document['status']} {document['code']}): {document['detail']}"
    return f"{text} [{fields}]" if fields else text


def tool_result(answer: ToolAnswer) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=_text(answer))],
        structured_content=answer.document,
        is_error=answer.is_error,
        _meta={REPLAYED_META: True} if answer.replayed else None,
    )


async def _list_tools(ctx, params) -> types.ListToolsResult:
    """The tools the token's scopes allow (as its verifier read them for this request): a model
    picks tools from this list, and a read-only token offered every write tool tried each one
    into a 403. Each call is still checked on its own (``mcp_tools``)."""
    access = get_access_token()
    if access is None or not (access.claims or {}).get("tenant_active"):
        # A suspended tenant's token was offered every tool, each call then refused: it is
        # refused here as every call is, with the API's problem document.
        problem = problem_of(tenant_suspended())
        raise MCPError(FORBIDDEN, f"{problem['title']}: {problem['detail']}", problem)
    scopes = set(access.scopes)
    return types.ListToolsResult(tools=[tool for scope, tool in TOOL_LIST if scope in scopes])


async def _call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    access = get_access_token()
    answer = await in_django_thread(
        call_tool,
        raw_token=access.token if access is not None else "",
        name=params.name,
        arguments=dict(params.arguments or {}),
        counted=True,
    )
    return tool_result(answer)


server = Server(
    "countersign",
    version="1.0.0",
    title="Countersign",
    instructions=INSTRUCTIONS,
    on_list_tools=_list_tools,
    on_call_tool=_call_tool,
)


def transport_security() -> TransportSecuritySettings:
    """The SDK's Host and Origin checks, from ALLOWED_HOSTS (``/mcp/`` never reaches Django's own
    host check). The SDK has no subdomain wildcard: ``.example.com`` allows ``example.com``."""
    hosts = [host.lstrip(".") for host in settings.ALLOWED_HOSTS]
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[spelling for host in hosts for spelling in (host, f"{host}:*")],
        allowed_origins=[
            f"{scheme}://{spelling}"
            for host in hosts
            for spelling in (host, f"{host}:*")
            for scheme in ("https", "http")
        ],
    )


def mcp_application() -> Starlette:
    """The SDK's ASGI app: ``PATH`` (and the lifespan that runs its session manager), with
    ``rate_guard`` and then ``mcp_shape.body_guard`` after the SDK's own middleware (bearer
    authentication): a body is read and checked only for a request with a valid token within
    its rate."""
    app = server.streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=True,
        json_response=True,
        max_request_body_size=MAX_BODY_BYTES,
        transport_security=transport_security(),
        # We are not an OAuth authorization server: without a resource_server_url the SDK
        # publishes no metadata and issuer_url names nothing a client is sent to.
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(settings.PUBLIC_BASE_URL), resource_server_url=None
        ),
        token_verifier=AgentTokenVerifier(),
    )
    # The SDK takes no middleware of ours; Starlette builds its stack from this list on the
    # first request, the last entry innermost.
    app.user_middleware.append(Middleware(rate_guard))
    app.user_middleware.append(Middleware(body_guard, max_body=MAX_BODY_BYTES))
    return app
