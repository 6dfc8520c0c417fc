"""Where a sign-in step sends the person next (``?next=``): one rule for every step."""

from __future__ import annotations

import unicodedata

from django.http import HttpRequest
from django.utils.http import url_has_allowed_host_and_scheme


def safe_next_url(request: HttpRequest, target: str | None, fallback: str = "/") -> str:
    """``target`` when it is a URL of this site: a path, or an address on this host (https only
    when the request came over https: a secure page may not send the person on over plain
    http). Otherwise ``fallback``.

    Always a URL, to be given to HttpResponseRedirect: django.shortcuts.redirect() takes a string
    with no "/" and no "." (``?next=foo``) for a view name, and reversing it failed (500), once
    right after a correct second-factor code had been spent.

    Never one holding a control character: browsers drop tabs and newlines from a URL before
    reading it (WHATWG URL), and so does Django's check, which read "/", a tab, "//evil.test/"
    as a path; a browser reads it as ``///evil.test/``, the host evil.test. A redirect header
    percent-encodes them, but the passkey sign-in hands this URL to the page's script, whose
    ``location.assign()`` went to that other site."""
    target = target or ""
    if any(unicodedata.category(char) == "Cc" for char in target):
        return fallback
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return fallback
    # Relative paths ("foo", "t/x/") depend on the page they are read from; none is ours.
    if not target.startswith("/") and not target.lower().startswith(("http://", "https://")):
        return fallback
    return target
