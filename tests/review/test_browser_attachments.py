"""In headless Chromium: a reviewer sees a draft's files (name, type, size, previews of the image
and of the PDF's first page), approves, and the worker sends exactly those bytes through the
sandbox AgentMail. Screenshots go to SCREENSHOT_DIR (docs/screenshots/ui-draft-attachments-*.png
when refreshing the committed ones), else to the test's own folder."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

from PIL import Image, ImageDraw

from intents import tasks
from intents.attachments import Upload
from intents.models import SendIntent
from tests.browser import BROWSER_MARKS, new_draft, shot, sign_in

pytestmark = BROWSER_MARKS


def label_png() -> bytes:
    image = Image.new("RGB", (360, 180), "white")
    draw = ImageDraw.Draw(image)
    draw.rectangle((8, 8, 352, 172), outline="black", width=4)
    draw.text((24, 40), "SHIPPING LABEL  #1042", fill="black")
    draw.text((24, 90), "to: customer@example.com", fill="black")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def invoice_pdf() -> bytes:
    """A one-page PDF (Pillow writes an image as a PDF page) with text to recognise."""
    page = Image.new("RGB", (595, 842), "white")
    draw = ImageDraw.Draw(page)
    draw.text((60, 60), "INVOICE 1042", fill="black")
    draw.text((60, 100), "1 x replacement part ...... 49.00 EUR", fill="black")
    draw.rectangle((50, 50, 545, 140), outline="black", width=2)
    out = io.BytesIO()
    page.save(out, format="PDF")
    return out.getvalue()


def test_reviewer_sees_the_files_previews_them_and_approves_the_exact_bytes(page, shop, sandbox):
    png, pdf = label_png(), invoice_pdf()
    draft = new_draft(
        shop,
        subject="Your label and invoice",
        attachments=[
            Upload("label-1042.png", "image/png", png),
            Upload("invoice-1042.pdf", "application/pdf", pdf),
            # Escaped on the page: shown unescaped, the name would read "notes <b>.txt".
            Upload("notes &lt;b&gt;.txt", "text/plain", b"<script>alert(1)</script>"),
        ],
    )
    page.set_default_timeout(30_000)  # the PDF preview renders on the server
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")

    items = page.locator("[data-attachments] li")
    assert items.count() == 3
    assert "label-1042.png" in items.nth(0).inner_text()
    assert "image/png" in items.nth(0).inner_text()
    assert items.nth(2).locator("a").inner_text() == "notes &lt;b&gt;.txt"
    previews = page.locator("img.attachment-preview")
    assert previews.count() == 2
    page.wait_for_function(
        "() => [...document.querySelectorAll('img.attachment-preview')]"
        ".every(i => i.complete && i.naturalWidth > 0)"
    )
    widths = previews.evaluate_all("imgs => imgs.map(i => i.naturalWidth)")
    # The image as it is; the PDF's first page rendered about 800 pixels wide (PDFium rounds).
    assert widths[0] == 360
    assert 795 <= widths[1] <= 805
    shot(page, "ui-draft-attachments-desktop")
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "ui-draft-attachments-phone")
    page.set_viewport_size({"width": 1280, "height": 900})

    with page.expect_download() as download:
        items.nth(1).locator("a").click()
    assert Path(download.value.path()).read_bytes() == pdf
    assert download.value.suggested_filename == "invoice-1042.pdf"

    page.click("[data-approve]")
    page.wait_for_url(re.compile(r"/outbox/\d+/$"))
    intent = SendIntent.objects.get(draft=draft)
    assert tasks.drain() == 1
    intent.refresh_from_db()
    [sent] = sandbox.ledger(idempotency_key=intent.idempotency_key)
    assert intent.state == "accepted"
    assert [base64.b64decode(a["content"]) for a in sent["attachments"]] == [
        png,
        pdf,
        b"<script>alert(1)</script>",
    ]
