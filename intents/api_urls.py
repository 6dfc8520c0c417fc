from django.shortcuts import redirect
from django.urls import path, re_path

from intents.api import api
from intents.api_docs import docs_asset
from intents.api_errors import problem_response


def api_root(request):
    return redirect("api:openapi-view")


def api_not_found(request, rest=""):
    return problem_response(status=404, code="not_found", detail="No such API route.")


urlpatterns = [
    path("", api_root, name="api_root_redirect"),
    path("docs/assets/<str:name>", docs_asset, name="api_docs_asset"),
    path("", api.urls),
    # Anything else under /api/v1/ answers in the API's own error format, not an HTML page.
    re_path(r"^(?P<rest>.*)$", api_not_found),
]
