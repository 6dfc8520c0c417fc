"""The HTML body of a draft version, as the document of the draft page's sandboxed frame.

It is served from its own URL, not written into the frame's ``srcdoc``: a ``srcdoc`` document
inherits the staff page's Content-Security-Policy, whose ``style-src 'self'`` blocks every
``style`` attribute and ``<style>`` element of the email. The approver then saw text that the
customer's mail client hides (``display:none``) and not the text its CSS adds (``::after``
content): not the message that goes out. This document's own policy lets its inline CSS apply
and nothing else: no scripts (``sandbox``, and the frame's ``sandbox`` attribute), no remote or
same-origin fetches (images only as ``data:``), no forms, framed only by our own pages. The URL
names the version, so the frame shows the version whose number and hash the approve form carries.

One change to what is stored: an ``<iframe>`` or ``<frame>`` tag is shown as text
(``frames_as_text``).
"""

from __future__ import annotations

import re

from django.http import Http404, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_safe

from intents import errors
from intents.selectors.drafts import draft_version_get
from tenants.access import TenantRequest, tenant_view

EMAIL_DOCUMENT_POLICY = (
    "sandbox; default-src 'none'; script-src 'none'; style-src 'unsafe-inline'; "
    "img-src data:; font-src data:; form-action 'none'; base-uri 'none'; "
    "frame-ancestors 'self'"
)

# Every "<" a browser reads as the start of an iframe or frame tag (its name is matched in
# ASCII, any case, ended by a space, "/" or ">"), wherever it stands: in text or an attribute
# value "&lt;" reads the same, in a comment or a style sheet it shows nothing either way. A
# <frame> loads only in a frameset document (a body that starts with <frameset>); "&lt;frame"
# there is text, which a frameset drops.
_FRAME_TAG = re.compile(r"<(?=i?frame[\t\n\f\r />])", re.IGNORECASE | re.ASCII)


def frames_as_text(html: str) -> str:
    """``html`` with its iframe and frame tags written as text. Chromium opens a connection to a
    frame's host (a DNS lookup, a TCP connection) even where the document's policy then refuses
    to load the frame: it told whoever wrote the HTML (a customer's mail that the agent quoted)
    when a reviewer opened the draft, and from which address. No mail client shows a frame; the
    reviewer sees its tag instead. The editor's live preview does the same (static/js/app.js)."""
    return _FRAME_TAG.sub("&lt;", html)


@tenant_view()
@require_safe
@never_cache
@xframe_options_sameorigin
def draft_version_html(request: TenantRequest, draft_id: int, number: int) -> HttpResponse:
    """The version's HTML body as stored (what is hashed and sent), its frames as text, locked
    down; 404 for another tenant's draft as for a missing one, 410 once retention purged the
    body."""
    try:
        version = draft_version_get(tenant=request.tenant, draft_id=draft_id, number=number)
    except errors.NotFound:
        raise Http404("No such version") from None
    status = 410 if version.body_purged_at is not None else 200
    body = frames_as_text(version.html) if status == 200 else ""
    response = HttpResponse(body, status=status, content_type="text/html; charset=utf-8")
    response["Content-Security-Policy"] = EMAIL_DOCUMENT_POLICY
    response["X-Content-Type-Options"] = "nosniff"
    response["Cross-Origin-Resource-Policy"] = "same-origin"
    response["Referrer-Policy"] = "no-referrer"
    return response
