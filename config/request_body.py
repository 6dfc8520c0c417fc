"""Request bodies bounded before anything reads them.

Django streams a multipart file to a temporary file whatever its size (DATA_UPLOAD_MAX_MEMORY_SIZE
counts only a form's other fields), and CSRF middleware parses the body of every unsafe request
that carries a CSRF cookie, which anyone can make up: a signed-out client could post gigabytes to
any page and fill the web host's temporary disk before a view's own size check ran. So a request
whose declared length is over the most its path takes (settings, "Request bodies":
``API_BODY_MAX_BYTES`` under /api/, ``REQUEST_BODY_MAX_BYTES`` elsewhere) is answered 413 here,
unread: the API's problem document under /api/, a plain page in the browser's language elsewhere.

A body without a Content-Length (``Transfer-Encoding: chunked``): gunicorn's WSGI worker hands it
on with no length, and Django under WSGI reads no body without one, so a form or an API call sent
so was checked as if empty. It is refused (411), which also says what to do. Behind the proxy of
DEPLOYMENT.md it never arrives: nginx reads a chunked body in whole (up to its own
``client_max_body_size``, the same figure) and passes it on with its length.

Under ASGI (``config.asgi``, when one ASGI server serves the whole product), Django's handler reads
the whole body into a temporary file before the first middleware runs; ``body_limit`` wraps it:
the same answers on the declared length, and a body without one is counted as it arrives and cut
off (413) once it passes the limit, so at most the limit reaches the disk. A chunked body is read
there, so it is not refused.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse
from django.template.defaultfilters import filesizeformat
from django.template.loader import render_to_string
from django.utils import translation
from django.utils.translation import gettext as _

from agent_api.auth import bad_content_length, body_too_large, length_required
from agent_api.errors import ApiProblem, on_problem

API_PREFIX = "/api/"
# Headers of every refusal here, which the middleware after this one (CSP, framing) never sees.
PAGE_HEADERS = {"Content-Security-Policy": "default-src 'none'", "X-Frame-Options": "DENY"}


def limit_for(path_info: str) -> int:
    """The most a request to this path may send."""
    if path_info.startswith(API_PREFIX):
        return settings.API_BODY_MAX_BYTES
    return settings.REQUEST_BODY_MAX_BYTES


def refusal(request: HttpRequest, *, chunked_is_read: bool) -> HttpResponse | None:
    """The answer to a request whose headers already say its body cannot be taken, or None."""
    raw = request.META.get("CONTENT_LENGTH") or ""
    if not raw:
        if request.META.get("HTTP_TRANSFER_ENCODING") and not chunked_is_read:
            return _answer(
                request,
                length_required(),
                411,
                lambda: _(
                    "Send the request with its Content-Length; a body without one is not read."
                ),
            )
        return None
    # int() would also take " 5", "+5" and "5_0"; a length is digits.
    if not (raw.isascii() and raw.isdigit()):
        return _answer(
            request,
            bad_content_length(),
            400,
            lambda: _("The request's Content-Length is not a number of bytes."),
        )
    declared, most = int(raw), limit_for(request.path_info)
    if declared <= most:
        return None

    def message() -> str:
        return _("This request is %(size)s; the most this site accepts is %(most)s.") % {
            "size": filesizeformat(declared),
            "most": filesizeformat(most),
        }

    return _answer(request, body_too_large(), 413, message)


def over_limit(request: HttpRequest) -> HttpResponse:
    """The answer once a body sent without its length has passed the limit (ASGI only)."""

    def message() -> str:
        return _("This request is larger than %(most)s, the most this site accepts.") % {
            "most": filesizeformat(limit_for(request.path_info))
        }

    return _answer(request, body_too_large(), 413, message)


def _answer(
    request: HttpRequest, problem: ApiProblem, status: int, message: Callable[[], str]
) -> HttpResponse:
    if request.path_info.startswith(API_PREFIX):
        return on_problem(request, problem)
    # Before LocaleMiddleware and the user's own choice: the browser's language, as on the
    # signed-out pages.
    with translation.override(translation.get_language_from_request(request)):
        page = render_to_string(
            "request_body_refused.html",
            {"status": status, "message": message(), "language": translation.get_language()},
        )
    response = HttpResponse(page, status=status)
    for name, value in PAGE_HEADERS.items():
        response[name] = value
    return response


class RequestBodyLimitMiddleware:
    """First after SecurityMiddleware (which only looks at the headers, and adds its own to this
    answer); nothing before it reads a body."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return refusal(request, chunked_is_read=False) or self.get_response(request)


def body_limit(app):
    """An ASGI app (Django's handler) behind the limits above; see the module's docstring."""

    async def guarded(scope, receive, send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        # The headers and path only: its body is an empty file, nothing of the client's is read;
        # no query string, which Django refuses (400) when it is not UTF-8, after the body.
        request = ASGIRequest({**scope, "query_string": b""}, io.BytesIO())
        answer = refusal(request, chunked_is_read=True)
        if answer is not None:
            await _send(send, answer)
            return
        most = limit_for(request.path_info)
        received, cut = 0, False

        async def counted():
            nonlocal received, cut
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > most:
                    # Django drops what it has read (a temporary file) and answers nothing.
                    cut = True
                    return {"type": "http.disconnect"}
            return message

        await app(scope, counted, send)
        if cut:
            await _send(send, over_limit(request))

    return guarded


async def _send(send, response: HttpResponse) -> None:
    headers = [
        (name.encode("latin-1"), value.encode("latin-1")) for name, value in response.items()
    ]
    headers.append((b"content-length", str(len(response.content)).encode()))
    # The rest of the body may still be on its way: the connection cannot carry another request.
    headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": response.content})
