"""Previews of attachments for the reviewer, made safe: what kind of image a file really is (by
its bytes, never by the name or type the agent declared), and the first page of a PDF rendered
to PNG on the server, so that no PDF reader runs in the reviewer's browser.

A file's bytes come from a customer or an agent and are hostile until shown otherwise.
"""

from __future__ import annotations

import fcntl
import io
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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

# The child that renders a PDF (``_render_child``): run from the project's root, with at most this
# much memory (the parent's deadline bounds its time; the CPU limit is a backstop if the parent
# is gone).
PROJECT_ROOT = Path(__file__).resolve().parents[1]
RENDER_MEMORY_BYTES = 1024**3
DEFAULT_RENDER_SECONDS = 5.0


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


class PreviewBusy(Exception):
    """Every render slot of the host stayed taken while we waited for one."""


class PreviewSlotsUnusable(Exception):
    """The slots' folder cannot be made or written (a file in its place, no permission, a full
    or read-only disk): a setting to fix, not a busy host."""


@contextmanager
def render_slot(directory: Path, *, slots: int, wait: float) -> Iterator[None]:
    """One of the ``slots`` PDF renders this host runs at once, held for the ``with`` block;
    PreviewBusy when none came free within ``wait`` seconds.

    Each render is a child of up to the preview deadline and RENDER_MEMORY_BYTES, started by a
    web worker that waits for it: unbounded, one draft of ten slow PDFs (each a new digest, so
    nothing cached) opened once took as many web workers as the browser sent requests, and
    gigabytes. The web workers are processes, so the slots are lock files every process of the
    host shares; the kernel releases a slot with its holder's file, even when the holder was
    killed mid-render (gunicorn's timeout). PreviewSlotsUnusable when the folder or a slot's
    file cannot be made or opened."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise PreviewSlotsUnusable(f"{type(exc).__name__}: {exc.strerror}") from None
    deadline = time.monotonic() + wait
    while True:
        for number in range(slots):
            try:
                fd = os.open(
                    directory / f"slot-{number}", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600
                )
            except OSError as exc:
                raise PreviewSlotsUnusable(f"{type(exc).__name__}: {exc.strerror}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield
            finally:
                os.close(fd)
            return
        if time.monotonic() >= deadline:
            raise PreviewBusy(f"all {slots} render slots taken for {wait} s")
        time.sleep(0.05)


def pdf_first_page_png(data: bytes, *, seconds: float = DEFAULT_RENDER_SECONDS) -> bytes:
    """The first page of a PDF as PNG bytes, PREVIEW_WIDTH pixels wide; PreviewFailed when the
    file is not a PDF PDFium can open, has no page, declares an absurd page size, or takes longer
    than ``seconds`` to draw.

    PDFium runs in a child process that is killed at the deadline: drawing cannot be stopped
    from outside in-process, and a page of 100,000 strokes is 5 KB of compressed PDF that took
    10 s to draw (a million, 44 KB: 110 s), holding a web worker (and, under the lock PDFium
    needs in one process, every other preview) each time a reviewer opened the draft."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "review.previews"],
            input=data,
            capture_output=True,
            timeout=seconds,
            cwd=PROJECT_ROOT,
            env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(PROJECT_ROOT)},
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise PreviewFailed(f"drawing took longer than {seconds} s") from None
    if done.returncode != 0 or not done.stdout.startswith(b"\x89PNG"):
        raise PreviewFailed(done.stderr.decode("utf-8", "replace")[-200:] or "render failed")
    return done.stdout


def _render(data: bytes) -> bytes:
    """PDFium's drawing of the first page (in the child process)."""
    import pypdfium2 as pdfium

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


def _render_child() -> int:
    """``python -m review.previews``: a PDF on stdin, its first page as PNG on stdout."""
    resource.setrlimit(resource.RLIMIT_AS, (RENDER_MEMORY_BYTES, RENDER_MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (60, 60))
    try:
        png = _render(sys.stdin.buffer.read())
    except PreviewFailed as exc:
        sys.stderr.write(str(exc))
        return 1
    sys.stdout.buffer.write(png)
    return 0


if __name__ == "__main__":
    sys.exit(_render_child())
