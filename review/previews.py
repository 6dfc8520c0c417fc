"""Previews of attachments for the reviewer, made safe: what kind of image a file really is (by
its bytes, never by the name or type the agent declared), and the first page of a PDF rendered
to PNG on the server, so that no PDF reader runs in the reviewer's browser.

A file's bytes come from a customer or an agent and are hostile until shown otherwise.
"""

from __future__ import annotations

import io
import threading

# Raster formats browsers decode without running anything, by their first bytes; the
# Content-Type of a preview is the one named here, whatever the file claimed to be. SVG is not
# among them: it is a document that can carry script.
RASTER_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
PDF_MAGIC = b"%PDF-"
# The rendered page's width in pixels (its height follows the page's proportions), and the
# largest page area we agree to render: a PDF may declare a page kilometres wide.
PREVIEW_WIDTH = 800
# At most this many pixels tall (three widths: an A4 page is 1.41); a taller page shows its top.
MAX_PREVIEW_HEIGHT = 3 * PREVIEW_WIDTH
MAX_PAGE_POINTS = 14_400 * 14_400

# PDFium is not thread-safe: one render at a time per process.
_pdfium_lock = threading.Lock()


def raster_type(data: bytes) -> str | None:
    """The image type the bytes are, from the allow-list, or None."""
    for magic, content_type in RASTER_MAGIC:
        if data.startswith(magic):
            return content_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def is_pdf(data: bytes) -> bool:
    # PDF readers accept the header within the first 1024 bytes; so do we, for the preview only.
    return PDF_MAGIC in data[:1024]


def previewable(content_type: str) -> str:
    """What preview the page offers for a file of this declared type: "image", "pdf" or ""
    (the view checks the bytes again before serving anything)."""
    if content_type in {"image/png", "image/jpeg", "image/gif", "image/webp"}:
        return "image"
    if content_type == "application/pdf":
        return "pdf"
    return ""


class PreviewFailed(Exception):
    pass


def pdf_first_page_png(data: bytes) -> bytes:
    """The first page of a PDF as PNG bytes, PREVIEW_WIDTH pixels wide; PreviewFailed when the
    file is not a PDF PDFium can open, has no page, or declares an absurd page size."""
    import pypdfium2 as pdfium  # imported on first use: the web process only needs it here

    with _pdfium_lock:
        try:
            document = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            raise PreviewFailed(str(exc)) from None
        try:
            if len(document) < 1:
                raise PreviewFailed("no pages")
            page = document[0]
            width, height = page.get_size()
            if width <= 0 or height <= 0 or width * height > MAX_PAGE_POINTS:
                raise PreviewFailed("page size out of range")
            scale = PREVIEW_WIDTH / width
            # A page far taller than wide (a 300-byte PDF can declare 100 x 125,000 points) would
            # be a bitmap of gigabytes at this width: only its top is drawn.
            hidden = max(0.0, height - MAX_PREVIEW_HEIGHT / scale)
            bitmap = page.render(scale=scale, crop=(0, hidden, 0, 0), may_draw_forms=False)
            image = bitmap.to_pil()
            out = io.BytesIO()
            image.save(out, format="PNG")
            return out.getvalue()
        except (pdfium.PdfiumError, MemoryError) as exc:
            raise PreviewFailed(type(exc).__name__) from None
        finally:
            document.close()
