"""Pages served to a signed-in person are stored by no cache.

They hold a customer's mail, the audit log, members' addresses, the person's sessions. Without a
``Cache-Control`` the browser keeps them on disk and shows them again after sign-out (the back
button on a shared computer, the disk cache of a lost laptop), and a proxy or CDN told to cache
pages may keep them too. An outside probe found every staff page without one; a few views that
show a secret once had set ``no-store`` themselves. A view that sets its own ``Cache-Control``
keeps it.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers


class PrivatePagesMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and not response.has_header("Cache-Control"):
            # max-age=0, no-cache, no-store, must-revalidate, private, and an Expires in the past.
            add_never_cache_headers(response)
        return response
