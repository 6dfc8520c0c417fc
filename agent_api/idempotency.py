"""Idempotency-Key for the agent API (draft-ietf-httpapi-idempotency-key-header, and Brandur's
Postgres design): a retried POST never does its work twice.

The protocol, per tenant and key:

1. Claim: insert the key row (``in_flight``, ``locked_until`` = database now + LOCK_SECONDS) in its
   own short transaction. The unique constraint (tenant, key) decides a race: exactly one request
   inserts, the others find the row.
2. A found row: a different fingerprint (method, path, canonical JSON body) -> 422; completed ->
   replay the stored status and exact bytes with ``Idempotent-Replayed: true``, once the
   caller's ``authorize`` let it (below); in flight and
   still locked -> 409 with Retry-After; in flight but the lock has passed (its request died) ->
   take it over with a new lock.
3. Work and completion commit in ONE transaction, and the completion is fenced on the lock value
   we set: if our lock lapsed and another request took the key over, our UPDATE matches nothing,
   our work rolls back, and only the other request's work survives.
4. An error (4xx refusal, or a crash inside the work) releases the key by deleting our claim: the
   work rolled back, so the client may correct the request and retry with the same key.

The fingerprint leaves the token out: a key is the tenant's, like Stripe's (the account's, not
the API key's). An admin who rotates an agent's token while a request of the old one is in flight
and its answer lost must not turn the agent's retry, with the same key and the new token, into a
422: a typical agent then tries a fresh key, and the draft is created twice. The row keeps the
token that made it, so a replay to another token can be told from a replay to the same one.

A stored answer is the document of a draft or broadcast as it stood (its text, recipients and
mailbox), so a replay is a read: ``authorize`` asks again whether the token may still reach what
the request names (its mailbox restriction may have been narrowed since) and refuses as the live
request would (the same 404). Another token of the tenant may be replayed the answer of a
request its predecessor made (a rotation) under that same check; where the check refuses it,
it is answered as a reused key instead (422), saying only that: another token's request this
one may not see. The token's scopes and its tenant's standing are the route's or the tool's
check, made before any of this; the fingerprint names the route or tool, so a token that passed
it has the scope the stored request needed.

Only successful (2xx) responses are stored and replayed. Keys are kept 24 h after completion
(``intents.retention.IDEMPOTENCY_RETENTION``); then intents' sweep deletes them, since the key
rows are intents' table (``api_idempotency_purge``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import DateTimeField, ExpressionWrapper, Q
from django.db.models.functions import Now
from django.http import HttpRequest, HttpResponse

from agent_api.errors import ApiProblem, request_json
from common.counters import count, counters_add
from intents.errors import DraftError
from intents.models import ApiIdempotencyKey
from tenants.models import AgentToken, Tenant

# Logger and event names are the ones from before the API became its own app: alerts match them.
log = logging.getLogger("intents.api")

HEADER = "Idempotency-Key"
KEY_RE = re.compile(r"^[A-Za-z0-9._~-]{1,255}$")
LOCK_SECONDS = 60
JSON_CONTENT_TYPE = "application/json"

Work = Callable[[], tuple[int, bytes]]
Prepare = Callable[[], None]
# Raises the live request's refusal if the caller may no longer reach what the request names.
Authorize = Callable[[], None]
# The Location header of a stored response, derived from its status and body, so a replay carries
# the same header as the first answer without storing headers.
Locate = Callable[[int, bytes], str | None]


@dataclass(frozen=True)
class KeyName:
    """How an entry point names the key, and what a fingerprint covers, in its refusals: the
    JSON API's header, or an MCP tool's argument."""

    field: str
    request: str


HTTP_KEY = KeyName(field=HEADER, request="another method, path or body")


@dataclass(frozen=True)
class Fingerprints:
    """A request's fingerprint as the store keeps it (without the token), and with the calling
    token's credential: what rows written before keys were the tenant's hold (they have no
    token), so the same token's retry still matches one. Such a row of another token stays a
    different request until the retention sweep removes it, a day after the change at most."""

    stored: str
    with_token: str

    def match(self, row: ApiIdempotencyKey) -> bool:
        return row.fingerprint == self.stored or (
            row.token_id is None and row.fingerprint == self.with_token
        )


class _LockLost(Exception):
    """Our in-flight lock lapsed and another request took the key over."""


def _lock_expiry():
    return ExpressionWrapper(Now() + timedelta(seconds=LOCK_SECONDS), output_field=DateTimeField())


def read_key(request: HttpRequest, *, required: bool) -> str | None:
    raw = request.headers.get(HEADER)
    if raw is None:
        if required:
            raise ApiProblem(
                400,
                "idempotency_key_missing",
                f"This request needs an '{HEADER}' header (1-255 of A-Za-z0-9._~-; "
                "a UUID is a good choice).",
                title="Idempotency-Key is missing",
                errors=[{"field": HEADER, "message": "required"}],
            )
        return None
    value = raw.strip()
    # The draft defines the value as an RFC 8941 sf-string ("..."); the bare form is common.
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    if not KEY_RE.fullmatch(value):
        raise ApiProblem(
            400,
            "idempotency_key_invalid",
            f"'{HEADER}' must be 1-255 characters of A-Za-z0-9._~-.",
            title="Idempotency-Key is malformed",
            errors=[{"field": HEADER, "message": "1-255 characters of A-Za-z0-9._~-"}],
        )
    return value


def fingerprint(*, method: str, path: str, data: object, credential: str = "") -> str:
    """sha256 over the credential, method, path and the canonical JSON of the body (key order and
    whitespace do not matter; values do). ``data`` is the parsed body, or None.

    The store's fingerprint has no credential (a key is the tenant's). With one (the agent
    token's id, ``token_credential``) it is what rows written before that hold, and what an MCP
    call without a key derives its key from (each token's own)."""
    canonical = ""
    if data is not None:
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256()
    digest.update(f"{credential}\n{method}\n{path}\n".encode())
    digest.update(canonical.encode())
    return digest.hexdigest()


def request_fingerprints(request: HttpRequest, *, credential: str) -> Fingerprints:
    """The fingerprints of the body as the operation read it (``errors.request_json``): a
    second, laxer reading (it kept the last of two equal keys) could tell two requests apart, or
    mix them up, differently from the work they ran."""
    body = request.body
    data = request_json(request) if body.strip() else None
    method, path = request.method or "", request.path
    return Fingerprints(
        stored=fingerprint(method=method, path=path, data=data),
        with_token=fingerprint(credential=credential, method=method, path=path, data=data),
    )


def _json_response(
    status: int, body: bytes, *, replayed: bool, locate: Locate | None = None
) -> HttpResponse:
    response = HttpResponse(body, status=status, content_type=JSON_CONTENT_TYPE)
    if replayed:
        response["Idempotent-Replayed"] = "true"
    location = locate(status, body) if locate else None
    if location:
        response["Location"] = location
    return response


def _in_flight_problem(name: KeyName) -> ApiProblem:
    return ApiProblem(
        409,
        "idempotency_key_in_flight",
        f"A request with this {name.field} is still being processed; retry shortly with the "
        "same key to receive its result.",
        title=f"A request is outstanding for this {name.field}",
        headers={"Retry-After": "1"},
    )


def _key_reused_problem(name: KeyName) -> ApiProblem:
    return ApiProblem(
        422,
        "idempotency_key_reused",
        f"This {name.field} was already used for a different request: {name.request} (a key is "
        "the tenant's, not the token's). Use a new key for a new request.",
        title=f"{name.field} is already used",
        errors=[{"field": name.field, "message": "already used for a different request"}],
    )


def _key_not_visible_problem(name: KeyName) -> ApiProblem:
    """Another token's request, the same as this one, whose answer this token may not see (its
    mailbox or draft is outside this token's mailboxes): what the answer is stays unsaid."""
    return ApiProblem(
        422,
        "idempotency_key_reused",
        f"This {name.field} was already used by another agent token of this tenant, for a "
        "request this token may not see. Use a new key for a new request.",
        title=f"{name.field} is already used",
        errors=[
            {
                "field": name.field,
                "message": "used by another token for a request it may not see",
            }
        ],
    )


def _claim(
    *,
    tenant: Tenant,
    token: AgentToken | None,
    key: str,
    fingerprints: Fingerprints,
    method: str,
    path: str,
    name: KeyName,
) -> tuple[ApiIdempotencyKey, datetime | None]:
    """(row, lock) for a request that must do the work, or (row, None) for a replay."""
    try:
        with transaction.atomic():
            row = ApiIdempotencyKey.objects.create(
                tenant=tenant,
                token=token,
                key=key,
                fingerprint=fingerprints.stored,
                method=method,
                path=path[:255],
                state=ApiIdempotencyKey.State.IN_FLIGHT,
                locked_until=_lock_expiry(),
            )
    except IntegrityError:
        pass
    else:
        lock = ApiIdempotencyKey.objects.values_list("locked_until", flat=True).get(pk=row.pk)
        return row, lock

    with transaction.atomic():
        held = (
            ApiIdempotencyKey.objects.select_for_update()
            .annotate(db_now=Now())
            .filter(tenant=tenant, key=key)
            .first()
        )
        if held is None:
            # Released (the first request failed) or purged between our insert and this read.
            raise _in_flight_problem(name)
        if not fingerprints.match(held):
            raise _key_reused_problem(name)
        if held.state == ApiIdempotencyKey.State.COMPLETED:
            return held, None
        if held.locked_until is not None and held.locked_until > held.db_now:
            raise _in_flight_problem(name)
        # The request holding this key died without completing or releasing it: take it over.
        # The work and its answer are now this token's.
        ApiIdempotencyKey.objects.filter(pk=held.pk).update(
            locked_until=_lock_expiry(), token=token, fingerprint=fingerprints.stored
        )
        lock = ApiIdempotencyKey.objects.values_list("locked_until", flat=True).get(pk=held.pk)
        log.info(
            "intents.api.idempotency_takeover",
            extra={"tenant_id": tenant.pk, "key_id": held.pk},
        )
        return held, lock


def _release(row_id: int, lock) -> None:
    ApiIdempotencyKey.objects.filter(
        pk=row_id, state=ApiIdempotencyKey.State.IN_FLIGHT, locked_until=lock
    ).delete()


def key_in_use(*, tenant: Tenant, keys: list[str], fingerprints: Fingerprints) -> str | None:
    """The first of ``keys`` the tenant's store holds for a request with these fingerprints."""
    if not keys:
        return None
    return (
        ApiIdempotencyKey.objects.filter(tenant=tenant, key__in=keys)
        .filter(
            Q(fingerprint=fingerprints.stored)
            | Q(token__isnull=True, fingerprint=fingerprints.with_token)
        )
        .values_list("key", flat=True)
        .first()
    )


def token_credential(token) -> str:
    """What of the caller went into a fingerprint, and still goes into a derived MCP key: the
    agent token's id (never its secret)."""
    return f"agent-token:{token.pk}" if token is not None else ""


def _made_by(row: ApiIdempotencyKey, token: AgentToken | None, fingerprints: Fingerprints) -> bool:
    """Whether the row holds a request of this token: its own, or, on a row written before the
    rows kept their token, a fingerprint with this token's credential."""
    if row.token_id is None:
        return row.fingerprint == fingerprints.with_token
    return token is not None and row.token_id == token.pk


@dataclass(frozen=True)
class Outcome:
    status: int
    body: bytes
    replayed: bool


def run_once(
    *,
    tenant: Tenant,
    token: AgentToken | None,
    key: str,
    fingerprints: Fingerprints,
    method: str,
    path: str,
    work: Work,
    authorize: Authorize,
    prepare: Prepare | None = None,
    name: KeyName = HTTP_KEY,
) -> Outcome:
    """Run ``work`` (returns status and JSON bytes) at most once per (tenant, key): the protocol
    above, for any entry point (the HTTP routes below, the MCP tools).

    ``prepare`` (network calls the work needs, such as fetching forwarded files) runs once the
    key is ours and before the work's transaction: a replay, a key in flight or a reused key is
    answered without it, and a failure of it releases the key like a failure of the work.
    ``authorize`` runs before a stored answer is replayed (the work checks for itself); its
    refusal is answered as it is to the token that made the request, and as a reused key to
    another (``_key_not_visible_problem``). ``name``: how a refusal names the key."""
    row, lock = _claim(
        tenant=tenant,
        token=token,
        key=key,
        fingerprints=fingerprints,
        method=method,
        path=path,
        name=name,
    )
    if lock is None:
        # Only a completed row comes back without a lock, and completing stores the response.
        assert row.response_status is not None and row.response_body is not None
        try:
            authorize()
        except (ApiProblem, DraftError):
            if _made_by(row, token, fingerprints):
                raise
            raise _key_not_visible_problem(name) from None
        log.info("intents.api.idempotent_replay", extra={"tenant_id": tenant.pk, "key_id": row.pk})
        counters_add([count(tenant.pk, "idempotent_replays")])
        return Outcome(row.response_status, bytes(row.response_body), replayed=True)

    try:
        if prepare is not None:
            prepare()
        with transaction.atomic():
            status, body = work()
            completed = ApiIdempotencyKey.objects.filter(
                pk=row.pk, state=ApiIdempotencyKey.State.IN_FLIGHT, locked_until=lock
            ).update(
                state=ApiIdempotencyKey.State.COMPLETED,
                response_status=status,
                response_body=body,
                completed_at=Now(),
                locked_until=None,
            )
            if completed != 1:
                raise _LockLost
    except _LockLost:
        log.warning(
            "intents.api.idempotency_lock_lost",
            extra={"tenant_id": tenant.pk, "key_id": row.pk},
        )
        raise _in_flight_problem(name) from None
    except BaseException:
        _release(row.pk, lock)
        raise
    return Outcome(status, body, replayed=False)


def run_idempotent(
    request: HttpRequest,
    *,
    tenant: Tenant,
    required: bool,
    work: Work,
    authorize: Authorize,
    locate: Locate | None = None,
    prepare: Prepare | None = None,
) -> HttpResponse:
    """``run_once`` keyed by the request's Idempotency-Key header (without one, ``prepare`` and
    then the work run once, the work in a transaction).

    ``locate`` gives the response's Location header from its status and body; a replay gets the
    same header as the first answer."""
    key = read_key(request, required=required)
    token: AgentToken | None = getattr(request, "auth", None)
    if key is None:
        if prepare is not None:
            prepare()
        with transaction.atomic():
            status, body = work()
        return _json_response(status, body, replayed=False, locate=locate)
    outcome = run_once(
        tenant=tenant,
        token=token,
        key=key,
        fingerprints=request_fingerprints(request, credential=token_credential(token)),
        # Django's handlers always set the method; only a hand-built request has none.
        method=request.method or "",
        path=request.path,
        work=work,
        authorize=authorize,
        prepare=prepare,
    )
    return _json_response(outcome.status, outcome.body, replayed=outcome.replayed, locate=locate)
