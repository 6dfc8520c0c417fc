"""Every error of the agent API as ``application/problem+json`` (RFC 9457).

Members: ``type`` (a stable URN per problem), ``title``, ``status``, ``detail``, plus the
extensions ``code`` (the same slug as the type's last part, for clients that branch on it) and
``errors`` (``[{field, message}]``, possibly empty). Ninja's own errors (validation, unparsable
body, authentication) are routed through here too, so a client only ever parses one shape.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import wraps
from http import HTTPStatus
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.utils.cache import add_never_cache_headers
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser

from common import strict_json
from intents.errors import DraftError

# Logger and event names are the ones from before the API became its own app: alerts match them.
log = logging.getLogger("intents.api")

PROBLEM_CONTENT_TYPE = "application/problem+json"
TYPE_BASE = "urn:countersign:problem:"


class ApiProblem(Exception):
    """Raised anywhere in the API to answer with one problem document."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        title: str | None = None,
        errors: Sequence[dict] = (),
        headers: dict[str, str] | None = None,
    ):
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.title = title or HTTPStatus(status).phrase
        self.errors = list(errors)
        self.headers = headers or {}


def problem_document(
    *,
    status: int,
    code: str,
    detail: str,
    title: str | None = None,
    errors: Iterable[dict] = (),
    extensions: Mapping[str, Any] | None = None,
) -> dict:
    """The RFC 9457 document: the JSON API's error body, and the MCP tools' error result.
    ``extensions``: members of the problem's own (a mailbox's storage bound and use), which
    never replace the standard ones."""
    return {
        **(extensions or {}),
        "type": TYPE_BASE + code,
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
        "errors": [_field_error(e) for e in errors],
    }


def _field_error(error: Mapping[str, Any]) -> dict:
    """``{field, message}``, and ``row`` for a broadcast's recipient row (counting from 1)."""
    if error.get("row") is None:
        return {"field": error.get("field"), "message": str(error.get("message", ""))}
    return {
        "field": error.get("field"),
        "row": int(error["row"]),
        "message": str(error.get("message", "")),
    }


def problem_response(
    *,
    status: int,
    code: str,
    detail: str,
    title: str | None = None,
    errors: Iterable[dict] = (),
    headers: dict[str, str] | None = None,
    extensions: Mapping[str, Any] | None = None,
) -> HttpResponse:
    body = problem_document(
        status=status, code=code, detail=detail, title=title, errors=errors, extensions=extensions
    )
    response = HttpResponse(
        json.dumps(body, ensure_ascii=False, separators=(",", ":")),
        status=status,
        content_type=PROBLEM_CONTENT_TYPE,
    )
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def _answer(view, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponseBase:
    try:
        response = view(request, *args, **kwargs)
    except Http404:
        return problem_response(status=404, code="not_found", detail="No such resource.")
    if response.status_code == 405 and response.get("Content-Type") != PROBLEM_CONTENT_TYPE:
        allowed = sorted({m.strip() for m in response.get("Allow", "").split(",") if m.strip()})
        return problem_response(
            status=405,
            code="method_not_allowed",
            detail=f"{request.method} is not allowed here; use {' or '.join(allowed)}.",
            headers={"Allow": ", ".join(allowed)},
        )
    return response


def api_view(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """A view under ``/api/v1/``: its 404 and 405 answers are problem documents too.

    CSRF exempt: the API's only credential is the bearer token, which a browser never attaches
    by itself, and a session cookie is refused (401) whatever the CSRF token. Without the
    exemption a POST to an unknown route would answer Django's 403 HTML page instead of a 404.
    Ninja and ``require_GET`` answer a wrong method with a plain-text 405; it keeps its ``Allow``.

    Stored by no cache, unless the view named its own ``Cache-Control`` (the docs' assets): the
    answers hold customer mail and addresses, as the staff pages do (tenants.private_pages).
    """

    @wraps(view)
    def wrapped(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponseBase:
        response = _answer(view, request, *args, **kwargs)
        if not response.has_header("Cache-Control"):
            add_never_cache_headers(response)
        return response

    return csrf_exempt(wrapped)


class UnstorableText(ValueError):
    """Valid JSON whose strings hold what no text column can store (NUL, unpaired surrogates)."""

    def __init__(self, field: str | None, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


def _refuse_unstorable(value, field: str | None = None) -> None:
    if isinstance(value, str):
        if "\x00" in value:
            raise UnstorableText(field, f"{field or 'the body'}: NUL characters are not allowed")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise UnstorableText(
                field, f"{field or 'the body'}: unpaired UTF-16 surrogates are not allowed"
            ) from None
    elif isinstance(value, float) and not math.isfinite(value):
        raise UnstorableText(field, f"{field or 'the body'}: numbers must be finite")
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_unstorable(key, field)
            _refuse_unstorable(item, f"{field}.{key}" if field else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_unstorable(item, f"{field}[{index}]" if field else f"[{index}]")


def check_storable(data) -> None:
    """Refuse (``UnstorableText``) what PostgreSQL would refuse: NUL, lone surrogates, NaN."""
    try:
        _refuse_unstorable(data)
    except RecursionError:
        raise UnstorableText(None, "the body is nested too deeply") from None


# Well below Python's recursion limit, so every later walk of the body (check_storable, pydantic,
# the fingerprint's json.dumps) has room; json itself gave up near 1,000 levels with a bare 400.
# Provenance is refused past its own 32 levels by the draft service, with its own words.
MAX_JSON_DEPTH = 512

# What strict_json's refusals are in the API: (status, problem code). A literal NaN (no field)
# is not JSON at all; a number beyond a float is JSON that no column stores.
_REFUSED_JSON = {
    "malformed": (400, "malformed_json"),
    "not_utf8": (400, "malformed_json"),
    "duplicate_key": (422, "duplicate_key"),
    "number_too_long": (422, "number_too_long"),
    "too_deep": (422, "too_deeply_nested"),
    "too_many_values": (413, "too_many_values"),
}


def parse_json(body: bytes):
    """The request body as the one JSON reading every part of the API uses (the operation's
    schema and the idempotency fingerprint alike), or ``ApiProblem``."""
    try:
        data = strict_json.loads(body, max_depth=MAX_JSON_DEPTH)
    except strict_json.JSONRefused as exc:
        raise json_refusal(exc) from None
    try:
        check_storable(data)
    except UnstorableText as exc:
        document = unstorable_problem(exc)
        raise ApiProblem(
            422, document["code"], exc.message, title=document["title"], errors=document["errors"]
        ) from None
    return data


def json_refusal(exc: strict_json.JSONRefused) -> ApiProblem:
    errors = [{"field": exc.field, "message": exc.message}]
    if exc.code == "not_finite":
        if exc.field is not None:
            return ApiProblem(
                422,
                "unstorable_value",
                exc.message,
                title="The request contains a value that cannot be stored",
                errors=errors,
            )
        status, code = 400, "malformed_json"
    else:
        status, code = _REFUSED_JSON[exc.code]
    if status == 400:
        return ApiProblem(
            400,
            code,
            f"The request body is not valid JSON: {exc.message}.",
            title="The body is not valid JSON",
            errors=[{"field": None, "message": exc.message}],
        )
    return ApiProblem(
        status,
        code,
        exc.message,
        title="The request body holds too many values"
        if code == "too_many_values"
        else "The request body cannot be read unambiguously",
        errors=errors,
    )


_READ_KEY = "_countersign_json"


def request_json(request: HttpRequest):
    """``parse_json`` of the request's body, read once per request: the operation's parser and
    the idempotency fingerprint both need it, and each read walks the whole body."""
    if _READ_KEY not in request.__dict__:
        request.__dict__[_READ_KEY] = parse_json(request.body)
    return request.__dict__[_READ_KEY]


class StrictJSONParser(Parser):
    """JSON read by ``parse_json``: refusals are problem documents, never a 500 or a guess."""

    def parse_body(self, request: HttpRequest):
        return request_json(request)


def _field_from_loc(loc: Sequence) -> str | None:
    """("body", "payload", "to", 3) -> "to[3]"; ("query", "limit") -> "limit"."""
    parts = list(loc)
    if parts and parts[0] in {"body", "query", "path", "header", "cookie"}:
        source = parts.pop(0)
        # Body parameters are nested under the view argument's name; the client never sees it.
        if source == "body" and parts and parts[0] == "payload":
            parts.pop(0)
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or None


# A body that is no JSON object at all: pydantic's words for it ("Field required", "Input
# should be a valid dictionary or object to extract fields from") named no field and did not
# say what was wrong with the request.
_WHOLE_BODY = {
    "missing": "the request needs a JSON object body; none was sent",
    "model_attributes_type": "the body must be a JSON object ({...}) with the route's fields",
    "dict_type": "the body must be a JSON object ({...}) with the route's fields",
    "model_type": "the body must be a JSON object ({...}) with the route's fields",
}


def _validation_message(error: Mapping[str, Any]) -> str:
    if tuple(error.get("loc", ())) in (("body", "payload"), ("body",)):
        whole = _WHOLE_BODY.get(str(error.get("type")))
        if whole:
            return whole
    message = str(error.get("msg", "invalid value"))
    # pydantic prefixes errors raised by our own validators; the prefix is noise to a client.
    return message.removeprefix("Value error, ")


def problem_of(exc: ApiProblem) -> dict:
    return problem_document(
        status=exc.status, code=exc.code, title=exc.title, detail=exc.detail, errors=exc.errors
    )


def on_problem(request: HttpRequest, exc: ApiProblem) -> HttpResponse:
    return problem_response(
        status=exc.status,
        code=exc.code,
        title=exc.title,
        detail=exc.detail,
        errors=exc.errors,
        headers=exc.headers,
    )


def validation_problem(raw_errors: Iterable[Mapping[str, Any]]) -> dict:
    """422 ``validation_failed`` from pydantic's errors, each naming its field (``to[2]``)."""
    errors = [
        {"field": _field_from_loc(e.get("loc", ())), "message": _validation_message(e)}
        for e in raw_errors
    ]
    first = errors[0] if errors else {"field": None, "message": "invalid request"}
    detail = f"{first['field']}: {first['message']}" if first["field"] else str(first["message"])
    if len(errors) > 1:
        detail += f" (and {len(errors) - 1} more)"
    return problem_document(
        status=422,
        code="validation_failed",
        title="The request is not valid",
        detail=detail,
        errors=errors,
    )


_STANDARD_MEMBERS = {"type", "title", "status", "detail", "code", "errors"}


def _send(document: dict) -> HttpResponse:
    return problem_response(
        status=document["status"],
        code=document["code"],
        title=document["title"],
        detail=document["detail"],
        errors=document["errors"],
        extensions={k: v for k, v in document.items() if k not in _STANDARD_MEMBERS},
    )


def on_validation(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    return _send(validation_problem(exc.errors))


def on_unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return problem_response(
        status=401,
        code="unauthenticated",
        title="Authentication required",
        detail="Send a valid, unexpired agent token as 'Authorization: Bearer cs_…'.",
        headers={"WWW-Authenticate": 'Bearer realm="countersign"'},
    )


def unstorable_problem(exc: UnstorableText) -> dict:
    return problem_document(
        status=422,
        code="unstorable_value",
        title="The request contains a value that cannot be stored",
        detail=exc.message,
        errors=[{"field": exc.field, "message": exc.message}],
    )


def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    # Ninja raises HttpError(400) from the parser's exception when the body cannot be used.
    if isinstance(exc.__cause__, ApiProblem):
        return on_problem(request, exc.__cause__)
    if exc.status_code == 400:
        return problem_response(
            status=400,
            code="malformed_json",
            title="The body is not valid JSON",
            detail="The request body could not be parsed as JSON.",
            errors=[{"field": None, "message": "malformed JSON"}],
        )
    return problem_response(status=exc.status_code, code="error", detail=str(exc))


def on_not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return problem_response(status=404, code="not_found", detail="No such resource.")


def draft_problem(exc: DraftError) -> dict:
    errors = [{"field": exc.field, "message": exc.message}]
    rows = getattr(exc, "rows", None)
    if rows is not None:
        source = getattr(exc, "source", "recipients")
        errors = [_row_error(source, r.row, r.field, r.message) for r in rows]
    return problem_document(
        status=int(getattr(exc, "status", 409)),
        code=exc.code,
        title=exc.code.replace("_", " ").capitalize(),
        detail=exc.message,
        errors=errors,
        # Figures a program acts on without parsing ``detail`` (a mailbox's storage share).
        extensions=getattr(exc, "extensions", None),
    )


def _row_error(source: str, row: int, field: str, message: str) -> dict:
    """One bad row of a broadcast's recipients, named as the caller wrote it. A JSON list's item
    by its 0-based index, as every other error of the API names an array's item (``to[1]``,
    and the body check's ``recipients[1].address``); a CSV's by the CSV and the row's field,
    with no index that pretends to be an array's. ``row``: the recipient's number, counting from
    1 (a CSV's from the line after the header), as the review page says it. Row 0 is the
    upload as a whole: no row, the input's own name."""
    if not row:
        return {"field": source if field == "recipients" else field, "message": message}
    if source == "recipients_csv":
        return {"field": f"recipients_csv.{field}", "row": row, "message": message}
    return {"field": f"recipients[{row - 1}].{field}", "row": row, "message": message}


def on_draft_error(request: HttpRequest, exc: DraftError) -> HttpResponse:
    return _send(draft_problem(exc))


def internal_problem() -> dict:
    """What a caller learns of a failure of ours: nothing of the exception (its text may name
    tables, values or another caller's data)."""
    return problem_document(
        status=500,
        code="internal_error",
        detail="Something went wrong on our side. Retrying with the same Idempotency-Key is safe.",
    )


def on_unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    log.exception(
        "intents.api.unexpected_error",
        extra={"path": request.path, "method": request.method},
    )
    return _send(internal_problem())


# Ninja looks a handler up along the exception's MRO: the order here does not matter.
_HANDLERS = (
    (ApiProblem, on_problem),
    (ValidationError, on_validation),
    (AuthenticationError, on_unauthenticated),
    (HttpError, on_http_error),
    (Http404, on_not_found),
    (DraftError, on_draft_error),
    (Exception, on_unexpected),
)


def install_exception_handlers(api: NinjaAPI) -> None:
    for exc_class, handler in _HANDLERS:
        # ninja types a handler as taking the exception or its class; ours take the instance,
        # which is what ninja passes. The loop over mixed pairs is fine at runtime.
        api.add_exception_handler(exc_class, handler)  # type: ignore[arg-type]
