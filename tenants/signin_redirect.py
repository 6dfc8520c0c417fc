"""An htmx request sent to the sign-in page takes the whole tab there.

A session that expired or was signed out elsewhere gets a redirect to the sign-in page, from
``login_required`` or from the sign-in gate. The browser's XHR follows it silently, and htmx
swapped the whole sign-in page into the fragment it was updating (the decision box, the
presence line). For htmx requests that redirect becomes an ``HX-Redirect`` to the sign-in page,
with ``next`` the page the person was on: the address the redirect carried is the fragment's
(``/approve/``, which answers only POST), not a page to come back to.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode, urlsplit

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django_htmx.http import HttpResponseClientRedirect

from tenants.next_url import safe_next_url


class HtmxSignInRedirectMiddleware:
    """After django-htmx's middleware (it reads ``request.htmx``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        htmx = getattr(request, "htmx", None)
        if not htmx or not to_sign_in(response):
            return response
        # The page in the tab, when HX-Current-URL names one of this site's (django-htmx gives
        # None for another origin); never the fragment's address, nor another site's.
        came_from = safe_next_url(request, htmx.current_url_abs_path, fallback="")
        target = reverse("login")
        if came_from:
            target = f"{target}?{urlencode({'next': came_from}, safe='/')}"
        client_redirect = HttpResponseClientRedirect(target)
        client_redirect.cookies = response.cookies
        # The same address answers a page's request with a plain redirect.
        patch_vary_headers(client_redirect, ["HX-Request"])
        return client_redirect


def to_sign_in(response: HttpResponse) -> bool:
    """A redirect of this site to its sign-in page (relative: Django builds them so)."""
    if response.status_code not in (301, 302, 303, 307, 308) or "Location" not in response:
        return False
    location = urlsplit(response["Location"])
    return not location.scheme and not location.netloc and location.path == reverse("login")
