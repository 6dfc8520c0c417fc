"""Request bodies are bounded before anything reads them (config.request_body).

Django streams a multipart file to a temporary file whatever its size (DATA_UPLOAD_MAX_MEMORY_SIZE
counts only the other fields), and CSRF middleware parses the body of every unsafe request that
carries a CSRF cookie, which anyone can make up: a signed-out client could fill the web host's
temporary disk before any view's size check ran. A declared length over
``REQUEST_BODY_MAX_BYTES`` (over ``API_BODY_MAX_BYTES`` under /api/) is now 413 with nothing
read, and a body without a length (chunked), which Django under WSGI never reads, is 411 rather
than taken for an empty one. The largest legitimate form, a broadcast with its biggest recipients
file and longest text, still goes through. tests/ops/test_request_body_servers.py sends the same
requests to gunicorn (WSGI and ASGI)."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.test.client import BOUNDARY as MULTIPART_BOUNDARY
from django.test.client import encode_multipart

from intents.models import Broadcast
from tests.factories import make_local_mailbox
from tests.routed_client import RoutedClient

pytestmark = pytest.mark.django_db

BOUNDARY = "cs-body-limit"
ROOT = Path(__file__).resolve().parents[2]


class MultipartBody(io.RawIOBase):
    """A multipart body of ``size`` bytes holding one file, made as it is read. Counts the bytes
    read, and the most files seen in ``temp_dir`` (where Django spools an upload) while reading."""

    def __init__(self, size: int, temp_dir: Path):
        self.head = (
            f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=recipients; "
            'filename="people.csv"\r\nContent-Type: text/csv\r\n\r\naddress\n'
        ).encode()
        self.tail = f"\r\n--{BOUNDARY}--\r\n".encode()
        self.size = size
        self.temp_dir = temp_dir
        self.position = 0
        self.bytes_read = 0
        self.files_seen = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        end = self.size if size is None or size < 0 else min(self.size, self.position + size)
        data = self._range(self.position, end)
        self.position = end
        self.bytes_read += len(data)
        self.files_seen = max(self.files_seen, len(os.listdir(self.temp_dir)))
        return data

    def _range(self, start: int, end: int) -> bytes:
        filler_end = self.size - len(self.tail)
        head = self.head[start:end]
        filler = b"x" * max(0, min(end, filler_end) - max(start, len(self.head)))
        tail = self.tail[max(0, start - filler_end) : max(0, end - filler_end)]
        return head + filler + tail


def post_body(client, path: str, body: MultipartBody, **meta):
    return client.generic(
        "POST",
        path,
        **{
            "wsgi.input": body,
            "CONTENT_LENGTH": str(body.size),
            "CONTENT_TYPE": f"multipart/form-data; boundary={BOUNDARY}",
            **meta,
        },
    )


def signed_out_with_a_made_up_csrf_cookie():
    client = RoutedClient(enforce_csrf_checks=True)
    client.cookies[settings.CSRF_COOKIE_NAME] = "a" * 32
    return client, "/signin/"


@pytest.fixture
def upload_dir(tmp_path):
    path = tmp_path / "uploads"
    path.mkdir()
    with override_settings(FILE_UPLOAD_TEMP_DIR=str(path)):
        yield path


def test_the_limits_are_derived_from_the_endpoints():
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == settings.API_BODY_MAX_BYTES
    assert settings.REQUEST_BODY_MAX_BYTES == (
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        + settings.BROADCAST_RECIPIENTS_MAX_BYTES
        + settings.MULTIPART_OVERHEAD_BYTES
    )
    assert settings.REQUEST_BODY_MAX_BYTES > settings.API_BODY_MAX_BYTES
    assert settings.REQUEST_BODY_MAX_BYTES > settings.WEBHOOK_BODY_MAX_BYTES


def test_a_signed_out_post_over_the_limit_is_413_before_a_byte_is_read(upload_dir):
    client, path = signed_out_with_a_made_up_csrf_cookie()
    body = MultipartBody(20 * 1024**2, upload_dir)

    response = post_body(client, path, body)

    assert response.status_code == 413
    assert (body.bytes_read, body.files_seen, os.listdir(upload_dir)) == (0, 0, [])
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "This request is 20.0\xa0MB; the most this site accepts is 9.2\xa0MB." in page
    assert "Nothing was saved." in page


def test_a_signed_in_upload_over_the_limit_is_413_before_a_byte_is_read(
    upload_dir, signed_in, member_of, tenant_a
):
    make_local_mailbox(tenant_a)
    client = signed_in(member_of(tenant_a, "approver").user)
    body = MultipartBody(10 * 1024**3, upload_dir)

    response = post_body(client, f"/t/{tenant_a.slug}/broadcasts/new/", body)

    assert response.status_code == 413
    assert (body.bytes_read, body.files_seen, os.listdir(upload_dir)) == (0, 0, [])
    assert "This request is 10.0\xa0GB" in response.content.decode()
    assert not Broadcast.objects.exists()


def test_the_refusal_speaks_the_browsers_language(upload_dir):
    client, path = signed_out_with_a_made_up_csrf_cookie()
    body = MultipartBody(settings.REQUEST_BODY_MAX_BYTES + 1, upload_dir)

    response = post_body(client, path, body, HTTP_ACCEPT_LANGUAGE="de")

    assert response.status_code == 413
    assert '<html lang="de">' in response.content.decode()


def test_an_api_body_over_the_apis_limit_is_its_problem_document_before_the_token_is_read(
    upload_dir,
):
    """The API's own limit (a draft with its attachments in base64), in the words and shape of
    its other refusals: a request without a token learns only that its body is too large."""
    body = MultipartBody(settings.API_BODY_MAX_BYTES + 1, upload_dir)

    response = post_body(RoutedClient(), "/api/v1/drafts", body)

    assert response.status_code == 413
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == {
        "type": "urn:countersign:problem:body_too_large",
        "title": "Request body too large",
        "status": 413,
        "detail": f"The request body is larger than {settings.API_BODY_MAX_BYTES // 1024} KiB.",
        "code": "body_too_large",
        "errors": [],
    }
    assert body.bytes_read == 0


def test_a_chunked_body_is_411_not_an_empty_one(upload_dir):
    """gunicorn hands a chunked body on without a Content-Length, and Django reads no body
    without one: the form would have been checked as if it were empty. Asked for the length."""
    client, path = signed_out_with_a_made_up_csrf_cookie()
    body = MultipartBody(settings.REQUEST_BODY_MAX_BYTES * 2, upload_dir)

    response = post_body(client, path, body, CONTENT_LENGTH="", HTTP_TRANSFER_ENCODING="chunked")

    assert response.status_code == 411
    assert "Send the request with its Content-Length; a body without one is not read." in (
        response.content.decode()
    )
    assert body.bytes_read == 0


def test_a_chunked_api_body_is_a_411_problem_document(upload_dir):
    body = MultipartBody(1000, upload_dir)

    response = post_body(
        RoutedClient(), "/api/v1/drafts", body, CONTENT_LENGTH="", HTTP_TRANSFER_ENCODING="chunked"
    )

    assert response.status_code == 411
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "length_required"


def test_a_content_length_that_is_no_number_is_400(upload_dir):
    body = MultipartBody(1000, upload_dir)

    response = post_body(RoutedClient(), "/api/v1/drafts", body, CONTENT_LENGTH="12e9")

    assert response.status_code == 400
    assert response.json()["code"] == "bad_content_length"
    assert body.bytes_read == 0


def test_the_largest_legitimate_upload_still_goes_through(signed_in, member_of, tenant_a):
    """A broadcast with a recipients file of the most the form takes (10,000 rows) and a text of
    the most characters, each four bytes in UTF-8: more than the API's limit, within the site's."""
    mailbox = make_local_mailbox(tenant_a)
    client = signed_in(member_of(tenant_a, "approver").user)
    header = "address,note\n"
    rows = [f"p{i:05d}@example.com," for i in range(settings.BROADCAST_MAX_RECIPIENTS)]
    room = settings.BROADCAST_RECIPIENTS_MAX_BYTES - len(header) - sum(len(r) + 1 for r in rows)
    each, extra = divmod(room, len(rows))
    csv_text = header + "".join(
        f"{row}{'n' * (each + (i < extra))}\n" for i, row in enumerate(rows)
    )
    data = {
        "mailbox": str(mailbox.pk),
        "name": "\N{GRINNING FACE}" * 200,
        "subject": "Hello",
        "text": "\N{GRINNING FACE}" * 1_000_000,
    }
    csv_bytes = csv_text.encode()

    def fields():
        return {**data, "recipients": SimpleUploadedFile("people.csv", csv_bytes, "text/csv")}

    body = encode_multipart(MULTIPART_BOUNDARY, fields())

    response = client.post(f"/t/{tenant_a.slug}/broadcasts/new/", fields())

    assert len(csv_bytes) == settings.BROADCAST_RECIPIENTS_MAX_BYTES
    assert settings.API_BODY_MAX_BYTES < len(body) <= settings.REQUEST_BODY_MAX_BYTES
    assert response.status_code == 302, response.content[:2000]
    assert Broadcast.objects.get().recipient_count == settings.BROADCAST_MAX_RECIPIENTS


def test_deployment_md_sets_nginx_to_the_same_figure():
    deployment = (ROOT / "DEPLOYMENT.md").read_text()
    figures = re.findall(r"client_max_body_size (\d+);", deployment)
    assert figures == [str(settings.REQUEST_BODY_MAX_BYTES)]


def test_the_middleware_runs_before_anything_that_reads_a_body():
    chain = settings.MIDDLEWARE
    mine = chain.index("config.request_body.RequestBodyLimitMiddleware")
    assert chain[:mine] == ["django.middleware.security.SecurityMiddleware"]
    assert json.dumps(chain).count("RequestBodyLimitMiddleware") == 1
