"""A draft's files for the reviewer: download, and a preview for images and PDFs.

The bytes are the customer's or the agent's, so nothing here lets a browser interpret them as
they were declared: a download is ``application/octet-stream`` as an attachment; an image preview
is served only for a file sent as an image whose bytes are one of a few raster formats, with the
Content-Type we read from them; a PDF (a file sent as one, whose bytes are one) is never served
inline: its first page is rendered to PNG here. Every response
carries ``X-Content-Type-Options: nosniff`` and ``Content-Security-Policy: sandbox`` (a document
opened from it runs nothing and has no origin). Another tenant's file is a 404, like a missing
one; a file of a version whose body retention purged is a 410, even while another draft's
version still holds the same bytes. A PDF preview asked for while the host already draws as many
as it may (ATTACHMENT_PREVIEW_RENDERS) is a 503 with Retry-After, and nothing is cached.
"""

from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings
from django.core.cache import cache
from django.http import Http404, HttpResponse
from django.utils.http import content_disposition_header
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from intents import errors
from intents.blobs import BlobPurged, blob_store, preview_cache_key
from intents.models import DraftAttachment
from intents.selectors.drafts import draft_attachment_get
from review.previews import (
    PreviewBusy,
    PreviewFailed,
    PreviewSlotsUnusable,
    is_pdf,
    pdf_first_page_png,
    previewable,
    raster_type,
    render_slot,
)
from tenants.access import TenantRequest, tenant_view

log = logging.getLogger(__name__)

PREVIEW_CACHE_SECONDS = 24 * 3600
FAILED_PREVIEW_CACHE_SECONDS = 3600
# How long a preview waits for a render slot: ordinary pages draw in about 0.2 s, so a draft of
# several PDFs still shows them all; one built to take the whole deadline holds its slot, and the
# requests behind it give their web worker back after this.
RENDER_SLOT_WAIT_SECONDS = 1.0
RETRY_AFTER_SECONDS = 5
LOCKED_DOWN = "sandbox; default-src 'none'"


def _attachment_or_404(request: TenantRequest, draft_id: int, attachment_id: int):
    try:
        return draft_attachment_get(
            tenant=request.tenant, draft_id=draft_id, attachment_id=attachment_id
        )
    except errors.NotFound:
        raise Http404("No such attachment") from None


def _locked_down(response: HttpResponse) -> HttpResponse:
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = LOCKED_DOWN
    response["Cross-Origin-Resource-Policy"] = "same-origin"
    response["Referrer-Policy"] = "no-referrer"
    return response


class _Purged(Exception):
    pass


def _bytes(attachment: DraftAttachment) -> bytes:
    if attachment.version.body_purged_at is not None:
        raise _Purged
    try:
        return blob_store().read(attachment.blob)
    except BlobPurged:
        raise _Purged from None


def _gone() -> HttpResponse:
    response = HttpResponse(
        _("This file was deleted at the end of the tenant's retention period."),
        status=410,
        content_type="text/plain; charset=utf-8",
    )
    return _locked_down(response)


def _busy() -> HttpResponse:
    response = HttpResponse(
        _("Too many previews are being drawn right now: reload the page in a moment."),
        status=503,
        content_type="text/plain; charset=utf-8",
    )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return _locked_down(response)


@tenant_view()
@require_safe
@never_cache
def attachment_download(request: TenantRequest, draft_id: int, attachment_id: int):
    attachment = _attachment_or_404(request, draft_id, attachment_id)
    try:
        data = _bytes(attachment)
    except _Purged:
        return _gone()
    response = HttpResponse(data, content_type="application/octet-stream")
    response["Content-Disposition"] = content_disposition_header(
        as_attachment=True, filename=attachment.filename
    )
    return _locked_down(response)


def _pdf_preview(attachment: DraftAttachment, data: bytes) -> bytes:
    """The PDF's first page as PNG, cached per tenant and digest: rendering takes about 0.2 s and
    the bytes of a digest never change. A failure is remembered too (as empty bytes, for less
    long): a PDF built to take the whole deadline to draw would otherwise take it again, and a
    web worker with it, each time the draft's page is opened."""
    key = preview_cache_key(attachment.tenant_id, attachment.sha256)
    png = cache.get(key)
    if png is None:
        with render_slot(
            Path(settings.ATTACHMENT_PREVIEW_SLOT_DIR),
            slots=settings.ATTACHMENT_PREVIEW_RENDERS,
            wait=RENDER_SLOT_WAIT_SECONDS,
        ):
            # The same file asked for twice at once: the second waited for the first's drawing.
            png = cache.get(key)
            if png is None:
                try:
                    png = pdf_first_page_png(data, seconds=settings.ATTACHMENT_PREVIEW_SECONDS)
                except PreviewFailed:
                    cache.set(key, b"", timeout=FAILED_PREVIEW_CACHE_SECONDS)
                    raise
                cache.set(key, png, timeout=PREVIEW_CACHE_SECONDS)
    if not png:
        raise PreviewFailed("an earlier rendering failed")
    return png


@tenant_view()
@require_safe
@never_cache
def attachment_preview(request: TenantRequest, draft_id: int, attachment_id: int):
    attachment = _attachment_or_404(request, draft_id, attachment_id)
    try:
        data = _bytes(attachment)
    except _Purged:
        return _gone()
    # The preview is of what the file goes out as (its declared type: the recipient's mail client
    # opens an application/pdf in a PDF reader, an image/png as an image), and only when its
    # bytes are that. Read by the bytes alone, a PDF reader's file that begins as a GIF (the PDF
    # header may stand anywhere in the first 1024 bytes) previewed as the GIF, not as its page.
    kind = previewable(attachment.content_type)
    image_type = raster_type(data) if kind == "image" else None
    if image_type is not None:
        response = HttpResponse(data, content_type=image_type)
    elif kind == "pdf" and is_pdf(data):
        try:
            response = HttpResponse(_pdf_preview(attachment, data), content_type="image/png")
        except PreviewFailed as exc:
            log.info(
                "review.attachment.preview_failed",
                extra={"attachment_id": attachment.pk, "reason": str(exc)[:200]},
            )
            raise Http404("No preview") from None
        except PreviewBusy:
            log.warning("review.attachment.preview_busy", extra={"attachment_id": attachment.pk})
            return _busy()
        except PreviewSlotsUnusable as exc:
            # The reviewer gets the busy answer (the page asks again on its next view); the
            # operator gets the folder to fix (ATTACHMENT_PREVIEW_SLOT_DIR).
            log.error(
                "review.attachment.preview_slots_unusable",
                extra={
                    "attachment_id": attachment.pk,
                    "slot_dir": settings.ATTACHMENT_PREVIEW_SLOT_DIR,
                    "reason": str(exc),
                },
            )
            return _busy()
    else:
        raise Http404("No preview")
    response["Content-Disposition"] = "inline"
    return _locked_down(response)
