"""The HTML body of a draft version, as the document of the draft page's sandboxed frame; and
the same document for a broadcast's sample message (``broadcast_sample_html``, in
``review.views.broadcasts``), served by the same code under the same policy.

It is served from its own URL, not written into the frame's ``srcdoc``: a ``srcdoc`` document
inherits the staff page's Content-Security-Policy, whose ``style-src 'self'`` blocks every
``style`` attribute and ``<style>`` element of the email. The approver then saw text that the
customer's mail client hides (``display:none``) and not the text its CSS adds (``::after``
content): not the message that goes out. This document's own policy lets its inline CSS apply
and nothing else: no scripts (``sandbox``, and the frame's ``sandbox`` attribute), no remote or
same-origin fetches (images only as ``data:``), no fonts of the email's own, no forms, framed only
by our own pages. The URL names the version, so the frame shows the version whose number and hash
the approve form carries.

Its fonts are not applied: a font the email embeds (an ``@font-face`` with a ``data:`` URL) draws
any character as any other, a "1" as a "6" in an IBAN or an amount. The reviewer read the digits
the font drew, the customer in Gmail (which drops embedded fonts) the ones the message holds, and
what is approved is the characters. Here they are set in the browser's own fonts; the draft page
says the message carries fonts (``intents.html_styles.style_warnings``), which a mail client that
applies them may draw otherwise.

It is one look: as wide as the frame, in the reviewer's browser's colour scheme, on a screen.
An email's CSS can show other text to a phone, to a reader in dark mode, on paper
(``intents.html_styles.reader_looks``); the draft page names them and can show the frame 390 px
wide, where the email's own media and container queries apply as on a phone. Dark mode it
cannot: Chromium (156, tried) gives a frame the browser's own ``prefers-color-scheme``, whatever
the iframe's or the staff page's ``color-scheme``, and a sandboxed frame runs nothing that could
change it; a rewrite of the email's CSS for a dark look would show what our
rewrite understood, not what a mail client applies.

One change to what is stored: an ``<iframe>`` or ``<frame>`` tag is shown as text
(``frames_as_text``).

The editor's preview is the same document for the HTML the edit form holds
(``draft_html_preview``): written into a ``srcdoc`` it fell under the staff page's policy too,
and the person who edited saw another message than the one they then approved.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_POST, require_safe

from intents import errors
from intents.selectors.drafts import draft_version_get
from intents.services.content import body_as_stored
from review.forms import HtmlPreviewForm
from review.views.common import draft_or_404, require_right
from tenants.access import DECIDERS, TenantRequest, tenant_view

EMAIL_DOCUMENT_POLICY = (
    "sandbox; default-src 'none'; script-src 'none'; style-src 'unsafe-inline'; "
    "img-src data:; font-src 'none'; form-action 'none'; base-uri 'none'; "
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
    reviewer sees its tag instead; so does the editor's preview (``draft_html_preview``)."""
    return _FRAME_TAG.sub("&lt;", html)


def _email_document(
    body: str, *, status: int = 200, content_type: str = "text/html"
) -> HttpResponse:
    response = HttpResponse(body, status=status, content_type=f"{content_type}; charset=utf-8")
    response["Content-Security-Policy"] = EMAIL_DOCUMENT_POLICY
    response["X-Content-Type-Options"] = "nosniff"
    response["Cross-Origin-Resource-Policy"] = "same-origin"
    response["Referrer-Policy"] = "no-referrer"
    return response


def email_document_view(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A view that answers a message's HTML as a framed document: read only, never cached,
    framed only by our own pages (the document's policy says so too)."""
    return require_safe(never_cache(xframe_options_sameorigin(view)))


def framed_html(html: str | None) -> HttpResponse:
    """The document of a sandboxed frame for a message's HTML body as it is sent, its frames as
    text; ``None`` for a body retention purged (410, nothing)."""
    if html is None:
        return _email_document("", status=410)
    return _email_document(frames_as_text(html))


def email_document_refused(words: str, *, status: int) -> HttpResponse:
    """A refusal shown in the frame as text, under the same policy."""
    return _email_document(words, status=status, content_type="text/plain")


@tenant_view()
@email_document_view
def draft_version_html(request: TenantRequest, draft_id: int, number: int) -> HttpResponse:
    """The version's HTML body as stored (what is hashed and sent), its frames as text, locked
    down; 404 for another tenant's draft as for a missing one, 410 once retention purged the
    body."""
    try:
        version = draft_version_get(tenant=request.tenant, draft_id=draft_id, number=number)
    except errors.NotFound:
        raise Http404("No such version") from None
    return framed_html(version.html if version.body_purged_at is None else None)


@tenant_view(roles=DECIDERS)
@require_POST
@never_cache
@xframe_options_sameorigin
def draft_html_preview(request: TenantRequest, draft_id: int) -> HttpResponse:
    """The edit form's ``html`` (posted into the editor's preview frame) as the draft page's
    frame will show it once saved: the body as a save stores it, the same document under the
    same policy. Nothing is stored and nothing else happens (no claim renewed, no journal).
    Who may not edit the draft is refused as the editor refuses them (404 for another tenant's
    draft; 403 for a viewer or without the right on its mailbox); HTML a save would refuse is
    refused with the save's words, shown in the frame as text (status 400)."""
    draft = draft_or_404(request, draft_id)
    try:
        require_right(request, draft.mailbox)
    except PermissionDenied as denied:
        return email_document_refused(str(denied), status=403)
    form = HtmlPreviewForm(request.POST)
    if not form.is_valid():
        return email_document_refused(str(form.errors["html"][0]), status=400)
    try:
        html = body_as_stored("html", form.cleaned_data["html"])
    except errors.InvalidInput as error:
        return email_document_refused(error.message, status=400)
    return framed_html(html)
