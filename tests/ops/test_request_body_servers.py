"""The body limits (config.request_body) against the servers DEPLOYMENT.md runs, on loopback:
gunicorn's sync workers on config.wsgi and its ASGI worker on config.asgi (which serves Django too
when one ASGI server serves the whole product).

Each request comes from a signed-out client with a made-up CSRF cookie, to a page whose CSRF
check parses the form: before the limit, gunicorn's WSGI worker spooled the file part to a
temporary file and waited for the rest of a 10 GB body, and Django's ASGI handler read any body,
with or without its length, into a temporary file before the first middleware ran."""

from __future__ import annotations

import socket
import sys
import time
from contextlib import contextmanager

import pytest
from django.conf import settings

from scripts import devstack
from tests.servers import free_port, server_database_url, serving

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BOUNDARY = "cs-body-limit"
FILE_PART = (
    f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=recipients; "
    'filename="people.csv"\r\nContent-Type: text/csv\r\n\r\naddress\n'
).encode()


def head(*, length: str | None) -> bytes:
    framing = f"Content-Length: {length}" if length else "Transfer-Encoding: chunked"
    return (
        "POST /signin/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Cookie: {settings.CSRF_COOKIE_NAME}={'a' * 32}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n{framing}\r\n\r\n"
    ).encode()


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def answer(client: socket.socket) -> bytes:
    """What the server answers, read until it closes the connection (or 20 s of silence)."""
    received = b""
    try:
        while data := client.recv(65536):
            received += data
    except OSError:
        pass
    return received


def uploads(directory) -> list[str]:
    """Django names an upload's temporary file ``tmp….upload.<ext>``."""
    return sorted(path.name for path in directory.iterdir() if ".upload" in path.name)


@contextmanager
def server(tmp_path, argv: list[str], name: str):
    temp_dir = tmp_path / "tmp"
    temp_dir.mkdir()
    port = free_port()
    env = {
        **devstack.child_env(),
        "DATABASE_URL": server_database_url(f"body-limit-{name}"),
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "GUNICORN_WORKERS": "1",
        # Where Django (FILE_UPLOAD_TEMP_DIR unset) and Python put temporary files.
        "TMPDIR": str(temp_dir),
    }
    with serving(
        name,
        [*argv, "--bind", f"127.0.0.1:{port}"],
        env=env,
        log_path=tmp_path / f"{name}.log",
        health_url=f"http://127.0.0.1:{port}/healthz",
    ):
        yield port, temp_dir


WSGI = [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi"]
ASGI = [sys.executable, "-m", "gunicorn", "config.asgi", "--worker-class", "asgi", "-w", "1"]


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=20)


def test_wsgi_refuses_a_huge_declared_body_before_writing_it(tmp_path):
    with server(tmp_path, WSGI, "wsgi") as (port, temp_dir):
        client = connect(port)
        client.sendall(head(length=str(10 * 1024**3)) + FILE_PART + b"x" * 256 * 1024)
        time.sleep(1)
        spooled = uploads(temp_dir)
        reply = answer(client)
        client.close()

    assert spooled == []
    assert reply.startswith(b"HTTP/1.1 413 "), reply[:300]
    assert b"the most this site accepts is 9.2\xc2\xa0MB" in reply


def test_wsgi_asks_a_chunked_body_for_its_length(tmp_path):
    """gunicorn passes the chunks on without a Content-Length, and Django reads no body without
    one: the sign-in form was checked as empty (CSRF: 403). Now 411, before any chunk is read."""
    with server(tmp_path, WSGI, "wsgi") as (port, temp_dir):
        client = connect(port)
        client.sendall(head(length=None) + chunk(FILE_PART + b"x" * 256 * 1024))
        reply = answer(client)
        client.close()

    assert reply.startswith(b"HTTP/1.1 411 "), reply[:300]
    assert uploads(temp_dir) == []


def test_asgi_refuses_a_huge_declared_body_before_reading_it(tmp_path):
    with server(tmp_path, ASGI, "asgi") as (port, _):
        client = connect(port)
        client.sendall(head(length=str(10 * 1024**3)) + FILE_PART + b"x" * 256 * 1024)
        reply = answer(client)
        client.close()

    assert reply.startswith(b"HTTP/1.1 413 "), reply[:300]
    assert b"the most this site accepts is 9.2\xc2\xa0MB" in reply


def test_asgi_cuts_a_chunked_body_off_at_the_limit(tmp_path):
    """Django's ASGI handler reads a chunked body (into a temporary file, before any middleware):
    counted as it arrives, it is cut off once past the limit, the rest never read."""
    piece = b"x" * 1024 * 1024
    with server(tmp_path, ASGI, "asgi") as (port, _):
        client = connect(port)
        client.sendall(head(length=None) + chunk(FILE_PART))
        try:
            for _ in range(settings.REQUEST_BODY_MAX_BYTES // len(piece) + 2):
                client.sendall(chunk(piece))
        except OSError:  # the server answered and closed while the body was still coming
            pass
        reply = answer(client)
        client.close()

    assert reply.startswith(b"HTTP/1.1 413 "), reply[:300]
    assert b"This request is larger than 9.2\xc2\xa0MB" in reply
