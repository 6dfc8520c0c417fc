"""PDF previews as a resource sink: each render is a child process of up to
ATTACHMENT_PREVIEW_SECONDS and 1 GB, and a draft may carry ten PDFs of distinct digests (each a
fresh render, the failure cached only after it). How many a host draws at once is bounded, and a
preview asked for while every slot is taken waits briefly, then answers 503 with Retry-After,
caching nothing, instead of starting one more renderer."""

from __future__ import annotations

import threading
import time
import zlib
from pathlib import Path

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from intents.attachments import Upload
from intents.blobs import preview_cache_key
from intents.models import DraftAttachment
from review.previews import PreviewBusy, render_slot
from tests.review.test_attachments import _hand_pdf, one_page_pdf

pytestmark = pytest.mark.django_db(transaction=True)


def _slow_pdf(strokes: int, marker: bytes) -> bytes:
    drawing = zlib.compress(b"0 0 m 595 842 l S\n" * strokes, 9)
    return _hand_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R /Marker (%s) >>" % marker,
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream"
            % (len(drawing), drawing),
        ]
    )


def _until_every_slot_is_taken(settings) -> None:
    """Until the other request holds the one slot (it is drawing), at most 2 s."""
    for _ in range(40):
        try:
            with render_slot(Path(settings.ATTACHMENT_PREVIEW_SLOT_DIR), slots=1, wait=0):
                pass
        except PreviewBusy:
            return
        time.sleep(0.05)
    raise AssertionError("the first preview never took its slot")


def _client(user) -> Client:
    client = Client()
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    return client


def test_a_preview_asked_while_every_render_slot_is_taken_is_503_and_starts_no_renderer(
    tenant_a, admin_a, make_draft, mailbox_a, settings
):
    """A hostile agent's draft of slow PDFs, opened by a reviewer: every one of them started
    its own renderer at once (one per web worker the browser's requests reached), each holding
    its worker for the whole deadline, so one page view tied up every web worker of the host."""
    settings.ATTACHMENT_PREVIEW_SECONDS = 3
    settings.ATTACHMENT_PREVIEW_RENDERS = 1
    draft = make_draft(
        mailbox_a,
        attachments=[
            Upload("slow-1.pdf", "application/pdf", _slow_pdf(1_000_000, b"one")),
            Upload("slow-2.pdf", "application/pdf", _slow_pdf(1_000_000, b"two")),
        ],
    )
    first, second = DraftAttachment.objects.filter(version__draft=draft).order_by("filename")

    def url(attachment):
        return reverse("attachment_preview", args=[tenant_a.slug, draft.pk, attachment.pk])

    held = threading.Thread(target=_client(admin_a.user).get, args=[url(first)])
    held.start()
    _until_every_slot_is_taken(settings)
    started = time.monotonic()
    busy = _client(admin_a.user).get(url(second))
    waited = time.monotonic() - started
    held.join()

    assert busy.status_code == 503
    assert busy["Retry-After"]
    assert busy["X-Content-Type-Options"] == "nosniff"
    assert busy["Content-Security-Policy"].startswith("sandbox")
    assert waited < 2
    assert cache.get(preview_cache_key(tenant_a.pk, second.sha256)) is None


def test_a_slot_freed_by_a_finished_render_serves_the_next_preview(
    tenant_a, admin_a, make_draft, mailbox_a, settings
):
    settings.ATTACHMENT_PREVIEW_RENDERS = 1
    draft = make_draft(
        mailbox_a,
        attachments=[
            Upload("a.pdf", "application/pdf", one_page_pdf()),
            Upload("b.pdf", "application/pdf", one_page_pdf() + b"\n%b"),
        ],
    )
    client = _client(admin_a.user)

    responses = [
        client.get(reverse("attachment_preview", args=[tenant_a.slug, draft.pk, attachment.pk]))
        for attachment in DraftAttachment.objects.filter(version__draft=draft)
    ]

    assert [r.status_code for r in responses] == [200, 200]


def test_a_slot_folder_that_cannot_be_made_answers_503_and_says_why_in_the_log(
    tenant_a, admin_a, make_draft, mailbox_a, settings, tmp_path, caplog
):
    """ATTACHMENT_PREVIEW_SLOT_DIR under a file (or unwritable, or on a full disk): the preview
    was a 500 with a traceback. It answers as a busy host does, and the log names the folder."""
    (tmp_path / "a-file").write_bytes(b"")
    settings.ATTACHMENT_PREVIEW_SLOT_DIR = str(tmp_path / "a-file" / "slots")
    draft = make_draft(mailbox_a, attachments=[Upload("a.pdf", "application/pdf", one_page_pdf())])
    attachment = DraftAttachment.objects.get(version__draft=draft)
    client = Client(raise_request_exception=False)
    client.force_login(admin_a.user, backend="django.contrib.auth.backends.ModelBackend")

    with caplog.at_level("ERROR", logger="review"):
        answer = client.get(
            reverse("attachment_preview", args=[tenant_a.slug, draft.pk, attachment.pk])
        )

    assert answer.status_code == 503 and answer["Retry-After"]
    assert answer["Content-Security-Policy"].startswith("sandbox")
    assert cache.get(preview_cache_key(tenant_a.pk, attachment.sha256)) is None
    [logged] = [r for r in caplog.records if r.msg == "review.attachment.preview_slots_unusable"]
    assert logged.levelname == "ERROR"
    assert logged.slot_dir == settings.ATTACHMENT_PREVIEW_SLOT_DIR
