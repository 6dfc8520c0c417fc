"""The ASGI application: ``/mcp/`` (the MCP server, agent_api.mcp_server) and everything else
(Django).

The MCP server is an ASGI app of the official ``mcp`` SDK, so it needs an ASGI server:
``gunicorn config.asgi -k asgi`` (gunicorn's own ASGI worker). The rest of the product stays on
WSGI (``config.wsgi``, gunicorn sync workers): the usual deployment serves ``/mcp/`` from this
entry and everything else from ``config.wsgi`` (DEPLOYMENT.md). Routing the rest to Django here
lets one ASGI server serve the whole product too, with Django's ASGI caveat that persistent
database connections are not reused (set ``DB_CONN_MAX_AGE=0`` for such a process).

The lifespan events go to the MCP app, which runs its session manager in them; Django's ASGI
handler answers HTTP only.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_handler = get_asgi_application()

# Imported once Django is set up: the MCP tools use its models.
from agent_api.mcp_server import PATH, mcp_application  # noqa: E402
from agent_api.mcp_shape import rpc_shape_guard  # noqa: E402
from config.request_body import body_limit  # noqa: E402

# Django's handler reads a whole body into a temporary file before its first middleware runs:
# the limits are applied before it (config.request_body).
django_application = body_limit(django_handler)

# What every MCP answer says (the SDK's, the shape guard's refusals, a 401): it holds what the
# JSON API's answers hold (drafts, customers' addresses), which Django marks no-store and nosniff
# (agent_api.api.api_view, SecurityMiddleware); the MCP SDK sets neither.
PRIVATE_HEADERS = (
    (b"cache-control", b"max-age=0, no-cache, no-store, must-revalidate, private"),
    (b"x-content-type-options", b"nosniff"),
)


def private_answers(app):
    """``app`` with ``PRIVATE_HEADERS`` on each response it starts, unless it set them."""

    async def wrapped(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)

        async def send_private(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {bytes(name).lower() for name, _ in headers}
                headers += [(n, v) for n, v in PRIVATE_HEADERS if n not in present]
                message = {**message, "headers": headers}
            await send(message)

        return await app(scope, receive, send_private)

    return wrapped


# The methods and media types the SDK mishandles (agent_api.mcp_shape) are answered before it;
# the bodies it mishandles, once it has authenticated the request (mcp_server).
mcp_app = private_answers(rpc_shape_guard(mcp_application()))
_MCP_PREFIX = PATH.rstrip("/")


def is_mcp(path: str) -> bool:
    return path == _MCP_PREFIX or path.startswith(PATH)


async def application(scope, receive, send):
    if scope["type"] == "lifespan" or (scope["type"] == "http" and is_mcp(scope["path"])):
        await mcp_app(scope, receive, send)
    else:
        await django_application(scope, receive, send)
