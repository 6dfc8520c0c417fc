"""The reviewer's view of a draft's files: listed with name, type and size; downloadable; previews
for images and PDFs served only as raster images we identified, locked down, from a
tenant-checked view; approval through the real view covers the files."""

from __future__ import annotations

import io
import zlib

import pypdfium2 as pdfium
import pytest
from django.core.cache import cache
from django.urls import reverse
from PIL import Image

from intents import services
from intents.attachments import Upload
from intents.blobs import preview_cache_key
from intents.models import DraftAttachment, DraftVersion, SendIntent
from review.previews import MAX_PREVIEW_HEIGHT, PREVIEW_WIDTH, pdf_first_page_png

pytestmark = pytest.mark.django_db

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f"
    b"\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d"
    b"\x00\x00\x00\x00IEND\xaeB`\x82"
)


def one_page_pdf() -> bytes:
    document = pdfium.PdfDocument.new()
    document.new_page(595, 842)
    out = io.BytesIO()
    document.save(out)
    document.close()
    return out.getvalue()


@pytest.fixture
def with_files(make_draft, mailbox_a):
    return make_draft(
        mailbox_a,
        attachments=[
            Upload("label.png", "image/png", PNG),
            Upload("invoice.pdf", "application/pdf", one_page_pdf()),
            Upload("notes.txt", "text/plain", b"<script>alert(1)</script>"),
            Upload("fake.png", "image/png", b"<html><script>alert(1)</script></html>"),
        ],
    )


def _file(draft, name):
    return DraftAttachment.objects.get(version__draft=draft, filename=name)


def _url(name, tenant, draft, attachment):
    return reverse(name, args=[tenant.slug, draft.pk, attachment.pk])


def _locked_down(response):
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"].startswith("sandbox")


def test_the_page_lists_each_file_with_type_size_download_and_preview(
    tenant_a, admin_a, signed_in, with_files
):
    client = signed_in(admin_a.user)

    page = client.get(reverse("draft", args=[tenant_a.slug, with_files.pk])).content.decode()

    for name in ("label.png", "invoice.pdf", "notes.txt"):
        assert _url("attachment_download", tenant_a, with_files, _file(with_files, name)) in page
    assert "image/png · 70\xa0bytes" in page
    assert _url("attachment_preview", tenant_a, with_files, _file(with_files, "label.png")) in page
    assert (
        _url("attachment_preview", tenant_a, with_files, _file(with_files, "invoice.pdf")) in page
    )
    assert (
        _url("attachment_preview", tenant_a, with_files, _file(with_files, "notes.txt")) not in page
    )


def test_a_pdf_preview_says_it_shows_the_first_page_only(tenant_a, admin_a, signed_in, with_files):
    """The preview is the PDF's first page: a reviewer who took it for the whole file approved
    pages nobody showed them. The page count is known only to the child that draws the page,
    after the page is served, so every PDF's preview says so; an image's says nothing."""
    client = signed_in(admin_a.user)

    page = client.get(reverse("draft", args=[tenant_a.slug, with_files.pk])).content.decode()

    pdf_item = page.split(f'data-attachment="{_file(with_files, "invoice.pdf").pk}"')[1]
    pdf_item = pdf_item.split("</li>")[0]
    image_item = page.split(f'data-attachment="{_file(with_files, "label.png").pk}"')[1]
    image_item = image_item.split("</li>")[0]
    assert "data-preview-note" in pdf_item
    assert "First page only: download the file to read every page." in pdf_item
    assert "data-preview-note" not in image_item


def test_a_download_is_an_octet_stream_attachment_never_rendered(
    tenant_a, admin_a, signed_in, with_files
):
    client = signed_in(admin_a.user)
    notes = _file(with_files, "notes.txt")

    response = client.get(_url("attachment_download", tenant_a, with_files, notes))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"] == 'attachment; filename="notes.txt"'
    assert response.content == b"<script>alert(1)</script>"
    _locked_down(response)


def test_an_image_preview_has_the_type_we_read_from_its_bytes(
    tenant_a, admin_a, signed_in, with_files
):
    client = signed_in(admin_a.user)

    response = client.get(
        _url("attachment_preview", tenant_a, with_files, _file(with_files, "label.png"))
    )

    assert response.status_code == 200
    assert response["Content-Type"] == "image/png"
    assert response.content == PNG
    _locked_down(response)


def test_a_file_that_only_claims_to_be_an_image_gets_no_preview(
    tenant_a, admin_a, signed_in, with_files
):
    client = signed_in(admin_a.user)

    response = client.get(
        _url("attachment_preview", tenant_a, with_files, _file(with_files, "fake.png"))
    )

    assert response.status_code == 404
    assert b"<script>" not in response.content


def test_a_pdf_preview_is_its_first_page_as_png_never_the_pdf(
    tenant_a, admin_a, signed_in, with_files
):
    client = signed_in(admin_a.user)

    response = client.get(
        _url("attachment_preview", tenant_a, with_files, _file(with_files, "invoice.pdf"))
    )

    assert response.status_code == 200
    assert response["Content-Type"] == "image/png"
    assert response.content.startswith(b"\x89PNG\r\n\x1a\n")
    assert b"%PDF" not in response.content
    _locked_down(response)


def test_another_tenants_member_gets_404_for_download_and_preview(
    tenant_a, tenant_b, member_of, signed_in, with_files
):
    outsider = member_of(tenant_b, "admin").user
    client = signed_in(outsider)
    png = _file(with_files, "label.png")

    for name in ("attachment_download", "attachment_preview"):
        in_their_tenant = reverse(name, args=[tenant_b.slug, with_files.pk, png.pk])
        in_ours = _url(name, tenant_a, with_files, png)
        assert client.get(in_their_tenant).status_code == 404
        assert client.get(in_ours).status_code == 404


def test_a_file_of_another_draft_is_404(
    tenant_a, admin_a, signed_in, with_files, make_draft, mailbox_a
):
    other = make_draft(mailbox_a)
    client = signed_in(admin_a.user)
    png = _file(with_files, "label.png")

    response = client.get(reverse("attachment_download", args=[tenant_a.slug, other.pk, png.pk]))

    assert response.status_code == 404


def test_approving_through_the_view_after_a_file_changed_is_refused(
    tenant_a, admin_a, signed_in, with_files
):
    client = signed_in(admin_a.user)
    seen = DraftVersion.objects.get(draft=with_files, number=1)
    services.draft_add_version(
        tenant=tenant_a,
        draft_id=with_files.pk,
        to=list(seen.to),
        cc=[],
        bcc=[],
        subject=seen.subject,
        text=seen.text,
        html="",
        actor_user=admin_a.user,
        attachments=[Upload("label.png", "image/png", PNG + b"\x00")],
    )
    approve = reverse("draft_approve", args=[tenant_a.slug, with_files.pk])

    stale = client.post(approve, {"version": 1, "content_hash": seen.content_hash})
    current = DraftVersion.objects.get(draft=with_files, number=2)
    fresh = client.post(approve, {"version": 2, "content_hash": current.content_hash})

    assert stale.status_code == 409
    assert fresh.status_code == 302
    intent = SendIntent.objects.get(draft=with_files)
    assert intent.draft_version_id == current.pk
    assert intent.content_hash == current.content_hash


def _tall_pdf(width: int, height: int) -> bytes:
    """A one-page PDF of that page size, written by hand: 300-odd bytes whatever the size."""
    return _hand_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] >>" % (width, height),
        ]
    )


def _slow_pdf(strokes: int) -> bytes:
    """A one-page PDF whose page draws ``strokes`` diagonal lines: compressed, a few bytes each."""
    drawing = zlib.compress(b"0 0 m 595 842 l S\n" * strokes, 9)
    return _hand_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream"
            % (len(drawing), drawing),
        ]
    )


def _hand_pdf(objects: list[bytes]) -> bytes:
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def test_a_page_far_taller_than_wide_previews_only_its_top():
    """100 x 125,000 points passes the area check; drawn whole at the preview's width it was an
    800 x 1,000,000 bitmap (5.5 GB). Now the preview stops at three widths."""
    png = pdf_first_page_png(_tall_pdf(100, 125_000))

    width, height = Image.open(io.BytesIO(png)).size
    assert abs(width - PREVIEW_WIDTH) <= 1 and abs(height - MAX_PREVIEW_HEIGHT) <= 1


def test_an_ordinary_page_previews_whole():
    png = pdf_first_page_png(_tall_pdf(595, 842))

    width, height = Image.open(io.BytesIO(png)).size
    assert abs(width - PREVIEW_WIDTH) <= 1 and abs(height - 842 * PREVIEW_WIDTH / 595) <= 1


def test_a_pdf_that_takes_too_long_to_draw_gets_no_preview_and_is_not_drawn_again(
    tenant_a, admin_a, signed_in, make_draft, mailbox_a, settings
):
    """300,000 strokes: 13 KB of PDF that PDFium drew for about 30 s, holding a web worker
    (and, behind the lock PDFium needs, every other preview of the process) each time a
    reviewer opened the draft. Past the deadline the child process drawing it is killed, and
    the failure is remembered so that the next page view does not start it again."""
    settings.ATTACHMENT_PREVIEW_SECONDS = 1
    draft = make_draft(
        mailbox_a, attachments=[Upload("slow.pdf", "application/pdf", _slow_pdf(300_000))]
    )
    slow = _file(draft, "slow.pdf")
    client = signed_in(admin_a.user)

    first = client.get(_url("attachment_preview", tenant_a, draft, slow))
    again = client.get(_url("attachment_preview", tenant_a, draft, slow))

    assert first.status_code == 404
    assert again.status_code == 404
    assert cache.get(preview_cache_key(tenant_a.pk, slow.sha256)) == b""


def _red_gif_holding(comment: bytes) -> bytes:
    """A one-pixel red GIF with ``comment`` in a comment block: every image decoder skips it."""
    screen = b"GIF89a\x01\x00\x01\x00\x80\x00\x00" + b"\xff\x00\x00\x00\x00\x00"
    remark = b"\x21\xfe" + bytes([len(comment)]) + comment + b"\x00"
    pixel = b"\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02\x44\x01\x00"
    return screen + remark + pixel + b"\x3b"


def _black_box_pdf() -> bytes:
    """A 200 x 100 point page with a black box over most of it."""
    drawing = b"0 0 0 rg 10 10 180 80 re f"
    return _hand_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 100] /Contents 4 0 R >>",
            b"<< /Length %d >>\nstream\n%s\nendstream" % (len(drawing), drawing),
        ]
    )


def test_a_pdf_whose_bytes_also_open_as_an_image_previews_as_the_page_its_reader_shows(
    tenant_a, admin_a, signed_in, make_draft, mailbox_a
):
    """invoice.pdf goes out as application/pdf: the customer's mail client opens it in a PDF
    reader, which finds the PDF's header anywhere in its first 1024 bytes. These bytes begin as
    a GIF (a red pixel, the header in its comment block): the preview served that GIF, and the
    reviewer approved a red pixel for a file that opens as a page with a black box."""
    data = _red_gif_holding(b"%PDF-1.4\n") + _black_box_pdf()
    assert Image.open(io.BytesIO(data)).convert("RGB").getpixel((0, 0)) == (255, 0, 0)
    draft = make_draft(mailbox_a, attachments=[Upload("invoice.pdf", "application/pdf", data)])
    client = signed_in(admin_a.user)

    response = client.get(_url("attachment_preview", tenant_a, draft, _file(draft, "invoice.pdf")))

    assert response.status_code == 200
    assert response["Content-Type"] == "image/png"
    page = Image.open(io.BytesIO(response.content)).convert("RGB")
    assert page.size[0] == PREVIEW_WIDTH
    assert page.getpixel((PREVIEW_WIDTH // 2, page.size[1] // 2)) == (0, 0, 0)
    _locked_down(response)


def test_a_pdf_sent_as_an_image_gets_no_preview(
    tenant_a, admin_a, signed_in, make_draft, mailbox_a
):
    """label.png goes out as image/png holding a PDF: no image viewer shows it. Its preview was
    the PDF's first page, a picture the customer would never see."""
    draft = make_draft(mailbox_a, attachments=[Upload("label.png", "image/png", _black_box_pdf())])
    client = signed_in(admin_a.user)

    response = client.get(_url("attachment_preview", tenant_a, draft, _file(draft, "label.png")))

    assert response.status_code == 404
