"""Interactive docs that work offline under our strict CSP, and the finishing touches on the
OpenAPI document that ninja cannot express (problem+json media type, protocol headers).

Ninja's Swagger page loads swagger-ui from a CDN unless ``ninja`` is an installed app. Its wheel
ships the assets (``ninja/static/ninja``) and a CSP-clean init script (settings in a JSON data
block, no inline code), so we serve those very files from the package: nothing vendored, no CDN.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ninja
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import escape
from django.views.decorators.http import require_GET
from ninja.openapi.docs import DocsBase

ASSET_DIR = Path(ninja.__file__).resolve().parent / "static" / "ninja"
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui-init.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon.png": "image/png",
}
PROBLEM = "application/problem+json"


@require_GET
def docs_asset(request: HttpRequest, name: str) -> FileResponse:
    if name not in ASSETS:
        raise Http404("No such asset")
    response = FileResponse((ASSET_DIR / name).open("rb"), content_type=ASSETS[name])
    response["Cache-Control"] = "public, max-age=86400"
    return response


class OfflineSwagger(DocsBase):
    settings: dict[str, Any] = {
        "layout": "BaseLayout",
        "deepLinking": True,
        # The default validator badge calls validator.swagger.io: no third-party requests.
        "validatorUrl": None,
        "persistAuthorization": False,
    }

    def render_page(self, request: HttpRequest, api, **kwargs: Any) -> HttpResponse:
        settings = {**self.settings, "url": self.get_openapi_url(api, kwargs)}
        # "</" cannot end the data block early once escaped like this.
        data = json.dumps(settings).replace("</", "<\\/")

        def asset(name: str) -> str:
            return escape(reverse("api_docs_asset", args=[name]))

        html = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{escape(api.title)}</title>
<link rel="stylesheet" href="{asset("swagger-ui.css")}">
<link rel="icon" href="{asset("favicon.png")}">
</head>
<body data-csrf-token="" data-api-csrf="">
<script type="application/json" id="swagger-settings">{data}</script>
<div id="swagger-ui"></div>
<script src="{asset("swagger-ui-bundle.js")}"></script>
<script src="{asset("swagger-ui-init.js")}"></script>
</body>
</html>
"""
        return HttpResponse(html)


IDEMPOTENCY_PARAMETER: dict[str, Any] = {
    "name": "Idempotency-Key",
    "in": "header",
    "description": (
        "1-255 of A-Za-z0-9._~- (a UUID is ideal). Same key + same request -> the stored "
        "response with Idempotent-Replayed: true; different request -> 422; still running -> 409."
    ),
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9._~-]{1,255}$"},
    "example": "8e03978e-40d5-43e8-bc93-6894a57f9324",
}
# The writes that create something answer 400 without a key (``run_idempotent(required=True)``)
# and point at what they created; every other write takes a key if given. The schema said the
# key was optional for POST /broadcasts, which refuses a request without one, and documented no
# key at all for the PUT.
KEY_REQUIRED = frozenset({"draft_create", "broadcast_create"})
WRITE_METHODS = frozenset({"post", "put"})
RETRY_AFTER = {
    "description": (
        "Seconds to wait before sending the same request again: on 429, and on 409 "
        "`idempotency_key_in_flight`. A 409 without it (`not_pending`, `version_conflict`, "
        "`mailbox_inactive`) describes the draft or mailbox: the same request will fail again."
    ),
    "schema": {"type": "integer", "minimum": 1},
}
LOCATION = {
    "description": "The created resource's URL (the same on a replay).",
    "schema": {"type": "string", "example": "/api/v1/drafts/1"},
}
REPLAYED = {
    "description": "Present (true) when this is the stored response of an earlier request "
    "with the same Idempotency-Key.",
    "schema": {"type": "string", "enum": ["true"]},
}


def _response_headers(operation: dict, method: str, code: int) -> dict:
    headers = {}
    if code in (409, 429):
        headers["Retry-After"] = RETRY_AFTER
    if method in WRITE_METHODS and code < 300:
        headers["Idempotent-Replayed"] = REPLAYED
    if operation.get("operationId") in KEY_REQUIRED and code == 201:
        headers["Location"] = LOCATION
    return headers


def finish_openapi_schema(schema: dict) -> dict:
    for path_item in schema.get("paths", {}).values():
        for method, operation in path_item.items():
            responses = operation.get("responses", {})
            for status, response in responses.items():
                code = int(status)
                content = response.get("content", {})
                if code >= 400 and "application/json" in content:
                    response["content"] = {PROBLEM: content["application/json"]}
                if headers := _response_headers(operation, method, code):
                    response["headers"] = headers
            if method in WRITE_METHODS:
                parameter = dict(IDEMPOTENCY_PARAMETER)
                parameter["required"] = operation.get("operationId") in KEY_REQUIRED
                operation.setdefault("parameters", []).append(parameter)
    return schema
