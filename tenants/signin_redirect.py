"""An htmx request sent to the sign-in page takes the whole tab there.

A session that expired or was signed out elsewhere gets a redirect to the sign-in page, from
``login_required`` or from the sign-in gate. The browser's XHR follows it silently, and htmx
swapped the whole sign-in page into the fragment it was updating (the decision box, the
presence line). For htmx requests that redirect becomes an ``HX-Redirect`` to the sign-in page,
with ``next`` the page the person was on: the address the redirect carried is the fragment's
(``/approve/``, which answers only POST), not a page to come back to. A page's own form,
posted after the session went, is sent to the sign-in page with ``next`` the page it was posted
from (its Referer), for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs, urlencode, urlsplit

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django_htmx.http import HttpResponseClientRedirect

from tenants.next_url import safe_next_url


class SignInRedirectMiddleware:
    """Where a request whose session is gone is sent to sign in, and where it comes back to: an
    htmx request's tab and a posted form's page, not the address the request went to. After
    django-htmx's middleware (it reads ``request.htmx``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        htmx = getattr(request, "htmx", None)
        if not to_sign_in(response):
            return response
        if not htmx:
            if request.method not in ("GET", "HEAD") and _comes_back_here(response, request):
                # A form posted from a page: back to that page (its same-origin Referer), not to
                # the address it posted to, which answers only POST (a 405 after signing in).
                # The post did nothing; the person posts again from the page.
                page = safe_next_url(request, request.headers.get("Referer"), fallback="")
                response["Location"] = _sign_in_then(_path_of(page))
            return response
        # The page in the tab, when HX-Current-URL names one of this site's (django-htmx gives
        # None for another origin); never the fragment's address, nor another site's.
        came_from = safe_next_url(request, htmx.current_url_abs_path, fallback="")
        client_redirect = HttpResponseClientRedirect(_sign_in_then(came_from))
        client_redirect.cookies = response.cookies
        # The same address answers a page's request with a plain redirect.
        patch_vary_headers(client_redirect, ["HX-Request"])
        return client_redirect


def _comes_back_here(response: HttpResponse, request: HttpRequest) -> bool:
    """Whether the sign-in redirect's ``next`` is the address this request was sent to (as
    ``login_required`` writes it), rather than one a view chose."""
    nexts = parse_qs(urlsplit(response["Location"]).query).get("next", [])
    return len(nexts) == 1 and _path_of(nexts[0]) == request.get_full_path()


def _path_of(url: str) -> str:
    """The path and query of a URL of this site (a Referer is absolute)."""
    if not url:
        return ""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _sign_in_then(came_from: str) -> str:
    """The sign-in page, then ``came_from`` (a URL of this site), if any."""
    target = reverse("login")
    return f"{target}?{urlencode({'next': came_from}, safe='/')}" if came_from else target


def to_sign_in(response: HttpResponse) -> bool:
    """A redirect of this site to its sign-in page (relative: Django builds them so)."""
    if response.status_code not in (301, 302, 303, 307, 308) or "Location" not in response:
        return False
    location = urlsplit(response["Location"])
    return not location.scheme and not location.netloc and location.path == reverse("login")
