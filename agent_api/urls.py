from django.shortcuts import redirect
from django.urls import URLPattern, path, re_path
from django.views.decorators.http import require_GET

from agent_api.api import api
from agent_api.docs import docs_asset
from agent_api.errors import api_view, problem_response


@require_GET
def api_root(request):
    return redirect("api:openapi-view")


def api_not_found(request, rest=""):
    return problem_response(status=404, code="not_found", detail="No such API route.")


# Ninja's schema and docs views answer any method; its operations check theirs themselves.
_NINJA_READ_ONLY = frozenset({"openapi-json", "openapi-view", "api-root"})


def _problem_errors(patterns):
    wrapped = []
    for p in patterns:
        view = require_GET(p.callback) if p.name in _NINJA_READ_ONLY else p.callback
        wrapped.append(URLPattern(p.pattern, api_view(view), p.default_args, p.name))
    return wrapped


ninja_patterns, ninja_app, ninja_namespace = api.urls

urlpatterns = [
    path("", api_view(api_root), name="api_root_redirect"),
    path("docs/assets/<str:name>", api_view(docs_asset), name="api_docs_asset"),
    path("", (_problem_errors(ninja_patterns), ninja_app, ninja_namespace)),
    # Anything else under /api/v1/ answers in the API's own error format, not an HTML page.
    re_path(r"^(?P<rest>.*)$", api_view(api_not_found)),
]
