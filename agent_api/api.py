"""The agent API (django-ninja) under ``/api/v1/``: the one ``NinjaAPI`` with its published
description, offline docs, strict JSON parser and problem+json errors; the routes are in
``routes.py``.
"""

from __future__ import annotations

from django.conf import settings
from ninja import NinjaAPI

from agent_api.auth import MAX_BODY_BYTES, rate_limit_per_window
from agent_api.docs import OfflineSwagger, finish_openapi_schema
from agent_api.errors import MAX_JSON_DEPTH, StrictJSONParser, install_exception_handlers
from agent_api.idempotency import LOCK_SECONDS
from agent_api.routes import router
from agent_api.routes_analytics import router as analytics_router
from agent_api.routes_broadcasts import router as broadcasts_router
from common import strict_json
from intents import services
from intents.retention import IDEMPOTENCY_RETENTION

RETENTION_HOURS = int(IDEMPOTENCY_RETENTION.total_seconds() // 3600)

DESCRIPTION = f"""
The agent API of Countersign: AI agents post draft replies; people approve them in the browser;
workers send each approved reply exactly once. **An agent token can never approve or send.**

### Authentication
`Authorization: Bearer cs_<prefix>_<secret>` with a token a tenant admin created (Admin → Agent
tokens). The token names the tenant; a browser session cookie is not accepted (401). Scopes:
`drafts:write` (create, revise, withdraw) and `drafts:read` (read drafts and mailboxes); a missing
scope is 403. A token restricted to some mailboxes sees only those; any other mailbox or draft is
a 404, exactly like a missing one.

### Replies
A draft with `in_reply_to` is a reply to that message, which must be one this mailbox received
(and in `thread_id`, when given); otherwise **422** naming `in_reply_to`. AgentMail's reply route
takes no subject: the reply joins that message's thread and is titled "Re: " plus its subject
(no second "Re: "). That subject is the one stored, shown to the approver and hashed: leave
`subject` out, or send exactly it; any other is **422** naming `subject`. A customer's message
is known a few seconds after it arrives (our webhook); `in_reply_to_unknown` just after is worth
a retry. The id is compared exactly, angle brackets included: one the mailbox received written
with its brackets left out or added is `in_reply_to_written_otherwise`, whose detail gives it as
received. `in_reply_to_inbox_lost` is final: the message was in the mailbox's inbox that was
deleted at AgentMail and made again, which no longer holds it (write a new message instead). So
is `in_reply_to_too_long`: an id of more than 998 bytes in UTF-8 is recorded cut, and no reply
can name it. A draft without `in_reply_to` is a new message, which starts a thread of its own:
`thread_id` is for replies only, and a new message naming one is **422**
`thread_id_without_in_reply_to` naming `thread_id` (to answer in a thread, give `in_reply_to`).

### Idempotency (IETF draft-ietf-httpapi-idempotency-key-header)
Every POST and PUT accepts an `Idempotency-Key` header (1-255 of `A-Za-z0-9._~-`, a UUID is
ideal; the RFC 8941 quoted form `"…"` is accepted too); `POST /drafts` and `POST /broadcasts`
**require** it (400 without).
Keys are scoped to the tenant, not to the token; the fingerprint is the method, the path and the
canonical JSON body. A retry with the same key from another token of the tenant (the token was
rotated while the request was in flight) is the same request; another tenant's key is never
seen.

* Same key, same request, after success: the stored status and byte-identical body, with
  `Idempotent-Replayed: true`, to any token of the tenant that may see it now: the mailbox or
  draft the request names is within the token's mailboxes, and the token has the route's scope
  (403 otherwise, before the key is read). The token that made the request gets the live
  refusal if it may no longer see it (404 `mailbox_not_found` or `not_found`); another token
  gets **422** `idempotency_key_reused`, saying the key was used by another token for a
  request this token may not see, and nothing of the answer.
* Same key, different request: **422** `idempotency_key_reused`.
* Same key while the first request is still running: **409** `idempotency_key_in_flight` with
  `Retry-After`. A request that died holds its key for at most {LOCK_SECONDS} s. Retry only a
  409 that carries `Retry-After`: the others (`not_pending`, `version_conflict`,
  `mailbox_inactive`) say what is in the way, and the same request fails again.
* A request refused with an error (4xx, or a 5xx: nothing was written) does not consume its key:
  correct it and retry with the same key. Only successful responses are stored.
* **Retention: {RETENTION_HOURS} hours** after completion, then the key
  is forgotten and may be used again.

### Errors
Every error is `application/problem+json` (RFC 9457): `type`, `title`, `status`, `detail`, a stable
`code`, and `errors: [{{field, message}}]`. Validation errors are 422 and name the field
(`to[2]`, `subject`); an array's item is named by its index, counting from 0. A broadcast's bad
recipient rows (422 `recipients_invalid`) add `row`: the recipient's number, counting from 1;
`field` names a `recipients` item by its index like any other (`recipients[1].address` is row
2) and a `recipients_csv` row by its column (`recipients_csv.address`,
`recipients_csv.variables.name`; rows count from the line after the header). A recipient
refused by the mailbox policy or the suppression list is 422 naming the address. A recipient
named twice, in one list or across `to`, `cc` and `bcc`, is
**422** `duplicate_recipient` naming the list it is repeated in and both spellings; it is never
merged silently. Two spellings of one address count as one: addresses are kept lower-cased (the
local part too), the domain in ASCII (`ana@bücher.de` is `ana@xn--bcher-kva.de`), white space
around them dropped, and compared with Unicode compatibility characters folded (a full-width
a, U+FF41, is an `a`); a display name (`Ana <ana@example.com>`) is not an address and is 422.
Date-times (`not_after`) are RFC 3339 strings with a time zone (`2027-01-31T17:00:00Z`): a number
is not read as a Unix time, and it, a date alone or a time without a zone is 422
`validation_failed` naming the field. Files that would take the tenant past its attachment
storage quota are **413** `storage_quota_exceeded`, and the draft's mailbox past its share of
it **413** `mailbox_storage_quota_exceeded` (below).

### Limits
Request bodies up to **{MAX_BODY_BYTES // 1024} KiB** (413 above), JSON in UTF-8 only (415
otherwise; a byte order mark or UTF-16 is 400 `malformed_json`); a key given twice in one object
is **422** `duplicate_key` naming it, and objects and arrays nest at most {MAX_JSON_DEPTH} levels
(422 `too_deeply_nested`) and hold fewer than {strict_json.MAX_VALUES:,} items and members
altogether (**413** `too_many_values`; a broadcast's recipients as `recipients_csv` are one
string);
at most {services.MAX_RECIPIENTS} recipients in to + cc + bcc; subject up to
{services.MAX_SUBJECT} characters on one line; bodies are stored and hashed with LF line endings
(CRLF and a lone CR become LF). **{rate_limit_per_window()} requests per minute per
token** (fixed one-minute window; 429 with `Retry-After`).

### Attachments
`attachments: [{{filename, content_type, content}}]`, `content` in base64: up to
{settings.ATTACHMENT_MAX_FILES} files, {settings.ATTACHMENT_MAX_FILE_BYTES} bytes each and
{settings.ATTACHMENT_MAX_DRAFT_BYTES} bytes together (AgentMail takes at most 6 MB per send, in
base64). Programs, scripts, disk images and macro documents are refused by extension, type and
content, also compressed or inside archives (ZIP, tar, gzip, bzip2, xz, nested); archives that
cannot be looked inside (7z, RAR and the like, damaged ones) are refused too; each refusal is 422
naming `attachments[i]` and the file (and the archive's member). The content hash covers every file's name,
type and SHA-256. `forward_attachments` sends back files of the message the draft answers, with
the same checks: a refused one is named `forward_attachments[i]`.

A tenant holds at most {settings.TENANT_ATTACHMENT_STORAGE_BYTES} bytes of files in all (unless
the operators gave it a quota of its own; the 413 names the tenant's figure): each
distinct file once (the same bytes attached to many drafts, or kept by a revision, cost nothing
more), until the retention period after its drafts are decided deletes it. A draft or revision
whose new files would pass it is refused whole, **413** `storage_quota_exceeded` naming
`attachments`, with the bytes in use and the quota in `detail`; nothing is stored and the
Idempotency-Key is not used up. Retrying soon will not help: leave the files out, or wait for
retention to free space.

Each mailbox holds at most {settings.MAILBOX_ATTACHMENT_STORAGE_SHARE:g} of the tenant's quota,
so that one mailbox's agent cannot fill it for all the others: a file counts against every
mailbox whose drafts attach it (once per mailbox; again it costs nothing more there), until
retention deletes its bytes. A draft or revision whose files would take its mailbox past that
is refused whole, **413** `mailbox_storage_quota_exceeded` naming `attachments`, with the
figures in `detail` and as members of the problem document: `mailbox` (its address),
`mailbox_storage_used` and `mailbox_storage_limit` (bytes), and `attachments_bytes` (what the
files would have added). Nothing is stored; the other mailboxes' agents still attach.
"""


class CountersignAPI(NinjaAPI):
    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        return finish_openapi_schema(schema)


api = CountersignAPI(
    title="Countersign agent API",
    version="1.0.0",
    description=DESCRIPTION,
    urls_namespace="api",
    docs=OfflineSwagger(),
    docs_url="/docs",
    openapi_url="/openapi.json",
    parser=StrictJSONParser(),
)
install_exception_handlers(api)
api.add_router("", router)
api.add_router("", analytics_router)
api.add_router("", broadcasts_router)
