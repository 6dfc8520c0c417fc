"""The `/v0` routes: the subset of AgentMail in reference §8, with scopes enforced (§8.2)."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message as HeaderMap
from typing import Any

from .errors import ApiError
from .store import EVENT_TYPES, Identity, Page, Store, dumps, iso, set_body

IDEMPOTENCY_KEY_RE = re.compile(r"[A-Za-z0-9._~-]{1,256}")
CLIENT_ID_RE = re.compile(r"[A-Za-z0-9._~-]{1,256}")
USERNAME_RE = re.compile(r"[a-z0-9](?:[a-z0-9._+-]{0,62}[a-z0-9])?")
DOMAIN_RE = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}")
ADDRESS_RE = re.compile(r"[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+")
DEFAULT_DOMAIN = "agentmail.to"
LIST_ITEM_DROPPED = ("reply_to", "text", "html", "extracted_text", "extracted_html")


@dataclass(slots=True)
class Reply:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, obj: Any) -> Reply:
        return cls(status, dumps(obj).encode())


@dataclass(slots=True)
class Call:
    method: str
    path: str
    params: dict[str, str]
    query: dict[str, list[str]]
    headers: HeaderMap
    body: bytes
    identity: Identity | None = None
    _json: Any = None

    def json(self) -> dict:
        if self._json is None:
            if not self.body.strip():
                self._json = {}
            else:
                try:
                    self._json = json.loads(self.body)
                except ValueError as exc:
                    raise ApiError.validation(f"Request body is not valid JSON: {exc}") from exc
            if not isinstance(self._json, dict):
                raise ApiError.validation("Request body must be a JSON object")
        return self._json

    def q(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else None

    @property
    def who(self) -> Identity:
        assert self.identity is not None
        return self.identity


Handler = Callable[[Call], Reply]


class Api:
    def __init__(self, store: Store):
        self.store = store
        # (method, path pattern below /v0, route name used by faults and the request log, handler)
        self.routes: list[tuple[str, str, str, Handler]] = [
            ("GET", "auth/me", "auth_me", self.auth_me),
            ("POST", "pods", "create_pod", self.create_pod),
            ("GET", "pods", "list_pods", self.list_pods),
            ("GET", "pods/{pod_id}", "get_pod", self.get_pod),
            ("POST", "pods/{pod_id}/inboxes", "create_inbox", self.create_inbox),
            ("GET", "pods/{pod_id}/inboxes", "list_inboxes", self.list_inboxes),
            ("GET", "pods/{pod_id}/inboxes/{inbox_id}", "get_inbox", self.get_inbox),
            ("POST", "pods/{pod_id}/api-keys", "create_api_key", self.create_api_key),
            ("GET", "pods/{pod_id}/api-keys", "list_api_keys", self.list_api_keys),
            ("DELETE", "pods/{pod_id}/api-keys/{api_key_id}", "delete_api_key", self.del_key),
            ("POST", "pods/{pod_id}/webhooks", "create_webhook", self.create_webhook),
            ("GET", "pods/{pod_id}/webhooks", "list_webhooks", self.list_webhooks),
            ("GET", "pods/{pod_id}/webhooks/{webhook_id}", "get_webhook", self.get_webhook),
            ("PATCH", "pods/{pod_id}/webhooks/{webhook_id}", "update_webhook", self.patch_hook),
            ("DELETE", "pods/{pod_id}/webhooks/{webhook_id}", "delete_webhook", self.del_hook),
            ("POST", "inboxes", "create_inbox", self.create_inbox),
            ("GET", "inboxes", "list_inboxes", self.list_inboxes),
            ("GET", "inboxes/{inbox_id}", "get_inbox", self.get_inbox),
            ("POST", "inboxes/{inbox_id}/api-keys", "create_api_key", self.create_api_key),
            ("GET", "inboxes/{inbox_id}/api-keys", "list_api_keys", self.list_api_keys),
            ("DELETE", "inboxes/{inbox_id}/api-keys/{api_key_id}", "delete_api_key", self.del_key),
            ("POST", "inboxes/{inbox_id}/webhooks", "create_webhook", self.create_webhook),
            ("GET", "inboxes/{inbox_id}/webhooks", "list_webhooks", self.list_webhooks),
            ("GET", "inboxes/{inbox_id}/webhooks/{webhook_id}", "get_webhook", self.get_webhook),
            (
                "PATCH",
                "inboxes/{inbox_id}/webhooks/{webhook_id}",
                "update_webhook",
                self.patch_hook,
            ),
            ("DELETE", "inboxes/{inbox_id}/webhooks/{webhook_id}", "delete_webhook", self.del_hook),
            ("POST", "inboxes/{inbox_id}/messages/send", "send", self.send),
            ("GET", "inboxes/{inbox_id}/messages", "list_messages", self.list_messages),
            ("GET", "inboxes/{inbox_id}/messages/{message_id}", "get_message", self.get_message),
            ("POST", "inboxes/{inbox_id}/messages/{message_id}/reply", "reply", self.reply),
            ("POST", "inboxes/{inbox_id}/messages/{message_id}/reply-all", "reply_all", self.rall),
            ("POST", "inboxes/{inbox_id}/messages/{message_id}/forward", "forward", self.forward),
            ("POST", "api-keys", "create_api_key", self.create_api_key),
            ("GET", "api-keys", "list_api_keys", self.list_api_keys),
            ("DELETE", "api-keys/{api_key_id}", "delete_api_key", self.del_key),
            ("POST", "webhooks", "create_webhook", self.create_webhook),
            ("GET", "webhooks", "list_webhooks", self.list_webhooks),
            ("GET", "webhooks/{webhook_id}", "get_webhook", self.get_webhook),
            ("PATCH", "webhooks/{webhook_id}", "update_webhook", self.patch_hook),
            ("DELETE", "webhooks/{webhook_id}", "delete_webhook", self.del_hook),
        ]

    # -- scope and permission checks --------------------------------------------------------------

    @staticmethod
    def perm(call: Call, flag: str) -> None:
        permissions = call.who.permissions
        if permissions is not None and not permissions.get(flag):
            raise ApiError(403, "missing_permission", "Forbidden")

    def scope_pod(self, call: Call, pod_id: str) -> dict:
        who = call.who
        if who.scope_type == "inbox":
            raise ApiError.forbidden("Inbox-scoped keys cannot use pod routes")
        pod = self.store.get_pod(pod_id)
        if pod is None or (who.scope_type == "pod" and who.pod_id != pod_id):
            raise ApiError.not_found("Pod")
        return pod

    def scope_inbox(self, call: Call) -> dict:
        """The inbox named in the path, if the caller may see it; out of scope reads as 404."""
        pod_id = call.params.get("pod_id")
        if pod_id is not None:
            self.scope_pod(call, pod_id)
        inbox_id = call.params["inbox_id"].lower()
        inbox = self.store.get_inbox(inbox_id)
        who = call.who
        if (
            inbox is None
            or (pod_id is not None and inbox["pod_id"] != pod_id)
            or (who.scope_type == "pod" and inbox["pod_id"] != who.pod_id)
            or (who.scope_type == "inbox" and inbox_id != who.inbox_id)
        ):
            raise ApiError.not_found("Inbox")
        return inbox

    def caller_pod(self, call: Call) -> str | None:
        """The pod the caller is confined to, None for an organization key."""
        who = call.who
        if who.scope_type == "pod":
            return who.pod_id
        if who.scope_type == "inbox":
            inbox = self.store.get_inbox(who.inbox_id or "")
            return inbox["pod_id"] if inbox else ""
        return None

    # -- paging -----------------------------------------------------------------------------------

    @staticmethod
    def paging(call: Call, cap: int = 1000) -> tuple[int, str | None, bool]:
        raw = call.q("limit")
        try:
            limit = 100 if raw is None else int(raw)
        except ValueError as exc:
            raise ApiError.validation("limit must be an integer", ["limit"]) from exc
        if limit < 1:
            raise ApiError.validation("limit must be positive", ["limit"])
        ascending = (call.q("ascending") or "false").lower() == "true"
        return min(limit, cap), call.q("page_token"), ascending

    @staticmethod
    def listing(key: str, page: Page, limit: int) -> Reply:
        out: dict[str, Any] = {"count": len(page.items), "limit": limit}
        if page.next_token:
            out["next_page_token"] = page.next_token
        out[key] = page.items
        return Reply.json(200, out)

    # -- identity, pods, inboxes ------------------------------------------------------------------

    def auth_me(self, call: Call) -> Reply:
        who = call.who
        out: dict[str, Any] = {"scope_type": who.scope_type}
        if who.scope_type == "organization":
            out["scope_id"] = self.store.organization_id
        elif who.scope_type == "pod":
            out |= {"scope_id": who.pod_id}
        else:
            out |= {"scope_id": who.inbox_id}
        out["organization_id"] = self.store.organization_id
        pod_id = self.caller_pod(call)
        if pod_id:
            out["pod_id"] = pod_id
        if who.inbox_id:
            out["inbox_id"] = who.inbox_id
        out["api_key_id"] = who.api_key_id
        return Reply.json(200, out)

    def create_pod(self, call: Call) -> Reply:
        if call.who.scope_type != "organization":
            raise ApiError.forbidden("Only organization keys can create pods")
        self.perm(call, "pod_create")
        body = call.json()
        name = _opt_str(body, "name")
        client_id = _client_id(body)
        return Reply.json(200, self.store.create_pod(name=name, client_id=client_id))

    def list_pods(self, call: Call) -> Reply:
        if call.who.scope_type == "inbox":
            raise ApiError.forbidden("Inbox-scoped keys cannot list pods")
        self.perm(call, "pod_read")
        limit, token, asc = self.paging(call)
        only = call.who.pod_id if call.who.scope_type == "pod" else None
        page = self.store.list_pods(only=only, limit=limit, token=token, asc=asc)
        return self.listing("pods", page, limit)

    def get_pod(self, call: Call) -> Reply:
        self.perm(call, "pod_read")
        return Reply.json(200, self.scope_pod(call, call.params["pod_id"]))

    def create_inbox(self, call: Call) -> Reply:
        who = call.who
        if "pod_id" in call.params:
            pod_id = self.scope_pod(call, call.params["pod_id"])["pod_id"]
        elif who.scope_type == "inbox":
            raise ApiError.forbidden("Inbox-scoped keys cannot create inboxes")
        else:
            pod_id = who.pod_id if who.scope_type == "pod" else self.store.default_pod_id
        self.perm(call, "inbox_create")
        body = call.json()
        client_id = _client_id(body)
        if client_id:
            existing = self.store.find_inbox_by_client_id(client_id)
            if existing is not None:
                if existing["pod_id"] != pod_id:
                    raise ApiError(403, "already_exists", "client_id is used by another inbox")
                return Reply.json(200, existing)
        username = _opt_str(body, "username")
        if username is not None:
            username = username.lower()
            if not USERNAME_RE.fullmatch(username):
                raise ApiError.validation("Invalid username", ["username"])
        domain = (_opt_str(body, "domain") or DEFAULT_DOMAIN).lower()
        if not DOMAIN_RE.fullmatch(domain):
            raise ApiError.validation("Invalid domain", ["domain"])
        status = _opt_str(body, "status")
        if status not in (None, "paused"):
            raise ApiError.validation("status must be 'paused'", ["status"])
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise ApiError.validation("metadata must be an object", ["metadata"])
        inbox = self.store.create_inbox(
            pod_id=pod_id,
            username=username,
            domain=domain,
            display_name=_opt_str(body, "display_name"),
            client_id=client_id,
            metadata=metadata,
            status=status,
        )
        return Reply.json(200, inbox)

    def list_inboxes(self, call: Call) -> Reply:
        who = call.who
        self.perm(call, "inbox_read")
        limit, token, asc = self.paging(call)
        pod_id = None
        if "pod_id" in call.params:
            pod_id = self.scope_pod(call, call.params["pod_id"])["pod_id"]
        elif who.scope_type == "pod":
            pod_id = who.pod_id
        inbox_id = who.inbox_id if who.scope_type == "inbox" else None
        page = self.store.list_inboxes(
            pod_id=pod_id, inbox_id=inbox_id, limit=limit, token=token, asc=asc
        )
        return self.listing("inboxes", page, limit)

    def get_inbox(self, call: Call) -> Reply:
        self.perm(call, "inbox_read")
        return Reply.json(200, self.scope_inbox(call))

    # -- api keys -----------------------------------------------------------------------------------

    def create_api_key(self, call: Call) -> Reply:
        who = call.who
        if "pod_id" in call.params:
            scope = ("pod", self.scope_pod(call, call.params["pod_id"])["pod_id"], None)
        elif "inbox_id" in call.params:
            scope = ("inbox", None, self.scope_inbox(call)["inbox_id"])
        else:
            scope = (who.scope_type, who.pod_id, who.inbox_id)
        self.perm(call, "api_key_create")
        body = call.json()
        permissions = body.get("permissions")
        if permissions is not None and (
            not isinstance(permissions, dict)
            or not all(isinstance(v, bool) for v in permissions.values())
        ):
            raise ApiError.validation("permissions must map names to booleans", ["permissions"])
        if who.permissions is not None:
            if permissions is None:
                raise ApiError(
                    403,
                    "unrestricted_key_required",
                    "Only an unrestricted key can create an unrestricted key",
                )
            if any(v and not who.permissions.get(k) for k, v in permissions.items()):
                raise ApiError(403, "permission_escalation", "Cannot grant a permission you lack")
        created = self.store.create_api_key(
            scope_type=scope[0],
            pod_id=scope[1],
            inbox_id=scope[2],
            name=_opt_str(body, "name"),
            permissions=permissions,
        )
        return Reply.json(200, created)

    def _key_filter(self, call: Call) -> tuple[str | None, list[str] | None]:
        who = call.who
        if "pod_id" in call.params:
            pod_id = self.scope_pod(call, call.params["pod_id"])["pod_id"]
            return pod_id, self.store.inbox_ids_in_pod(pod_id)
        if "inbox_id" in call.params:
            return None, [self.scope_inbox(call)["inbox_id"]]
        if who.scope_type == "pod" and who.pod_id:
            return who.pod_id, self.store.inbox_ids_in_pod(who.pod_id)
        if who.scope_type == "inbox" and who.inbox_id:
            return None, [who.inbox_id]
        return None, None

    def list_api_keys(self, call: Call) -> Reply:
        self.perm(call, "api_key_read")
        limit, token, _ = self.paging(call)
        pod_id, inbox_ids = self._key_filter(call)
        page = self.store.list_api_keys(
            pod_id=pod_id, inbox_ids=inbox_ids, limit=limit, token=token
        )
        return self.listing("api_keys", page, limit)

    def del_key(self, call: Call) -> Reply:
        self.perm(call, "api_key_delete")
        pod_id, inbox_ids = self._key_filter(call)
        key = self.store.get_api_key(call.params["api_key_id"])
        visible = key is not None and (
            (pod_id is None and inbox_ids is None)
            or (pod_id is not None and key.get("pod_id") == pod_id)
            or (inbox_ids is not None and key.get("inbox_id") in inbox_ids)
        )
        if not visible:
            raise ApiError.not_found("API key")
        self.store.delete_api_key(call.params["api_key_id"])
        return Reply(204)

    # -- messages -----------------------------------------------------------------------------------

    def list_messages(self, call: Call) -> Reply:
        inbox = self.scope_inbox(call)
        self.perm(call, "message_read")
        labels = [label.lower() for label in self._label_filter(call)]
        limit, token, asc = self.paging(call, cap=100 if labels else 1000)
        page = self.store.list_messages(
            inbox_id=inbox["inbox_id"],
            labels=labels,
            limit=limit,
            token=token,
            asc=asc,
            before=call.q("before"),
            after=call.q("after"),
        )
        page.items = [
            {k: v for k, v in m.items() if k not in LIST_ITEM_DROPPED} for m in page.items
        ]
        return self.listing("messages", page, limit)

    def _label_filter(self, call: Call) -> list[str]:
        """The `labels` query as the configured provider reads it (config `labels_query`)."""
        values = call.query.get("labels", [])
        mode = self.store.config["labels_query"]
        if mode == "ignored":
            return []
        if mode == "repeated":
            return list(values)
        return _query_list(values)

    def get_message(self, call: Call) -> Reply:
        inbox = self.scope_inbox(call)
        self.perm(call, "message_read")
        message = self.store.get_message(inbox["inbox_id"], call.params["message_id"])
        if message is None:
            raise ApiError.not_found("Message")
        return Reply.json(200, message)

    def send(self, call: Call) -> Reply:
        return self._send(call, "send")

    def reply(self, call: Call) -> Reply:
        return self._send(call, "reply")

    def rall(self, call: Call) -> Reply:
        return self._send(call, "reply_all")

    def forward(self, call: Call) -> Reply:
        return self._send(call, "forward")

    def _send(self, call: Call, route: str) -> Reply:
        inbox = self.scope_inbox(call)
        self.perm(call, "message_send")
        key = call.headers.get("Idempotency-Key")
        if key is not None and not IDEMPOTENCY_KEY_RE.fullmatch(key):
            raise ApiError.validation(
                "Idempotency-Key must be 1-256 characters from A-Z a-z 0-9 - . _ ~",
                ["Idempotency-Key"],
            )
        body = call.json()
        source = None
        if route != "send":
            source = self.store.get_message(inbox["inbox_id"], call.params["message_id"])
            if source is None:
                raise ApiError.not_found("Message")
        message = self._compose(inbox, route, body, source)
        fingerprint = json.dumps(
            {
                "route": route,
                "inbox_id": inbox["inbox_id"],
                "message_id": call.params.get("message_id"),
                "body": body,
            },
            sort_keys=True,
            separators=(",", ":"),
        )
        if key is not None:
            replay = self.store.idem_begin(key, fingerprint)
            if replay is not None:
                return Reply(replay[0], replay[1])
        recipients = message["to"] + message.get("cc", []) + message.get("bcc", [])
        try:
            blocked = self.store.suppressed(recipients)
            if blocked:
                raise ApiError(
                    403,
                    "message_rejected",
                    f"Recipient is suppressed: {', '.join(blocked)}",
                    name="MessageRejectedError",
                )
            latency = float(self.store.config["latency_ms"])
            if latency > 0:
                time.sleep(latency / 1000)
            stamp = iso(self.store.now())
            message["timestamp"] = message["created_at"] = message["updated_at"] = stamp
            response = dumps(
                {"message_id": message["message_id"], "thread_id": message["thread_id"]}
            ).encode()
            self.store.commit_send(
                message=message,
                pod_id=inbox["pod_id"],
                route=route,
                idempotency_key=key,
                response_body=response,
                identity=call.who,
            )
        except ApiError:
            if key is not None:
                self.store.idem_release(key)
            raise
        except BaseException:
            if key is not None:
                self.store.idem_fail(key)
            raise
        return Reply(200, response)

    def _compose(self, inbox: dict, route: str, body: dict, source: dict | None) -> dict:
        to = _addresses(body, "to")
        cc = _addresses(body, "cc")
        bcc = _addresses(body, "bcc")
        reply_to = _addresses(body, "reply_to")
        own = inbox["inbox_id"]
        subject = _opt_str(body, "subject")
        thread_id = str(uuid.uuid4())
        in_reply_to = None
        references: list[str] = []
        if source is not None and route in ("reply", "reply_all"):
            reply_all = route == "reply_all" or bool(body.get("reply_all"))
            if route == "reply" and body.get("reply_all") and (to or cc or bcc):
                raise ApiError.validation("reply_all cannot be combined with to, cc or bcc")
            direction = self.store.message_direction(own, source["message_id"])
            if direction == "inbound":
                original = source.get("reply_to") or [source["from"]]
            else:
                original = list(source["to"])
            if reply_all:
                others = [a for a in source["to"] if _bare(a) != own]
                to = _unique(original + (others if direction == "inbound" else []))
                cc = _unique([a for a in source.get("cc", []) if _bare(a) != own])
            elif not (to or cc or bcc):
                to = original
            subject = _prefixed("Re: ", source.get("subject"))
            thread_id = source["thread_id"]
            in_reply_to = source["message_id"]
            references = [*source.get("references", []), source["message_id"]]
        elif source is not None:
            subject = subject or _prefixed("Fwd: ", source.get("subject"))
        if not (to or cc or bcc):
            raise ApiError(422, "unprocessable", "Message must have at least one recipient")
        for name, values in (("to", to), ("cc", cc), ("bcc", bcc), ("reply_to", reply_to)):
            for index, value in enumerate(values):
                if not ADDRESS_RE.fullmatch(_bare(value)):
                    raise ApiError.validation(f"Invalid email address: {value}", [name, index])
        labels = body.get("labels", [])
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise ApiError.validation("labels must be a list of strings", ["labels"])
        headers = body.get("headers")
        if headers is not None and (
            not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values())
        ):
            raise ApiError.validation("headers must map names to strings", ["headers"])
        text = _opt_str(body, "text")
        html = _opt_str(body, "html")
        display = inbox.get("display_name")
        message: dict[str, Any] = {
            "inbox_id": own,
            "thread_id": thread_id,
            "message_id": f"<{uuid.uuid4()}@{own.split('@', 1)[1]}>",
            "labels": _unique(["sent", *(label.lower() for label in labels)]),
            "timestamp": "",
            "from": f"{display} <{own}>" if display else own,
        }
        if reply_to:
            message["reply_to"] = reply_to
        message["to"] = to
        if cc:
            message["cc"] = cc
        if bcc:
            message["bcc"] = bcc
        if subject is not None:
            message["subject"] = subject
        set_body(message, text, html)
        attachments = body.get("attachments")
        if attachments:
            message["attachments"] = _attachments(attachments)
        if in_reply_to:
            message["in_reply_to"] = in_reply_to
            message["references"] = references
        if headers:
            message["headers"] = headers
        message["size"] = message.pop("size")
        return message

    # -- webhooks -----------------------------------------------------------------------------------

    def _hook_visible(self, call: Call, hook: dict) -> bool:
        who = call.who
        if "pod_id" in call.params and hook.get("pod_id") != call.params["pod_id"]:
            return False
        if "inbox_id" in call.params and hook.get("inbox_id") != call.params["inbox_id"].lower():
            return False
        if who.scope_type == "organization":
            return True
        if who.scope_type == "inbox":
            return hook.get("inbox_id") == who.inbox_id
        if hook.get("pod_id") == who.pod_id:
            return True
        inbox = self.store.get_inbox(hook.get("inbox_id") or "")
        return inbox is not None and inbox["pod_id"] == who.pod_id

    def _hook_scope(self, call: Call) -> None:
        if "pod_id" in call.params:
            self.scope_pod(call, call.params["pod_id"])
        elif "inbox_id" in call.params:
            self.scope_inbox(call)

    def create_webhook(self, call: Call) -> Reply:
        owner: dict[str, str] = {}
        if "pod_id" in call.params:
            owner["pod_id"] = self.scope_pod(call, call.params["pod_id"])["pod_id"]
        elif "inbox_id" in call.params:
            owner["inbox_id"] = self.scope_inbox(call)["inbox_id"]
        elif call.who.scope_type != "organization":
            raise ApiError.forbidden("Use the pod or inbox webhook routes with a scoped key")
        self.perm(call, "webhook_create")
        body = call.json()
        url = body.get("url")
        if not isinstance(url, str) or not re.match(r"https?://", url):
            raise ApiError.validation("url must be an http(s) URL", ["url"])
        event_types = _event_types(body.get("event_types"))
        if not event_types:
            raise ApiError.validation("At least one event type is required", ["event_types"])
        spec: dict[str, Any] = {"url": url, "event_types": event_types}
        for name in ("pod_ids", "inbox_ids"):
            ids = body.get(name)
            if ids is None:
                continue
            if not isinstance(ids, list) or len(ids) > 10:
                raise ApiError.validation(f"{name} must be a list of at most 10 ids", [name])
            spec[name] = [str(x).lower() if name == "inbox_ids" else str(x) for x in ids]
        spec |= owner
        client_id = _client_id(body)
        if client_id:
            spec["client_id"] = client_id
        headers = body.get("headers") or {}
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise ApiError.validation("headers must map names to strings", ["headers"])
        return Reply.json(200, self.store.create_webhook(spec=spec, headers=headers))

    def list_webhooks(self, call: Call) -> Reply:
        self._hook_scope(call)
        self.perm(call, "webhook_read")
        limit, token, _ = self.paging(call)
        page = self.store.list_webhooks(
            predicate=lambda hook: self._hook_visible(call, hook), limit=limit, token=token
        )
        return self.listing("webhooks", page, limit)

    def _hook(self, call: Call) -> dict:
        self._hook_scope(call)
        hook = self.store.get_webhook(call.params["webhook_id"])
        if hook is None or not self._hook_visible(call, hook):
            raise ApiError.not_found("Webhook")
        return hook

    def get_webhook(self, call: Call) -> Reply:
        self.perm(call, "webhook_read")
        return Reply.json(200, self._hook(call))

    def patch_hook(self, call: Call) -> Reply:
        self.perm(call, "webhook_update")
        hook = self._hook(call)
        body = call.json()
        event_types = _event_types(body.get("event_types"))
        if event_types:
            hook["event_types"] = event_types
        for name in ("pod_ids", "inbox_ids"):
            current = list(hook.get(name) or [])
            for value in _str_list(body, "add_" + name):
                if value not in current:
                    current.append(value)
            removed = set(_str_list(body, "remove_" + name))
            current = [v for v in current if v not in removed]
            if current or name in hook:
                hook[name] = current
        reenabled = False
        if "enabled" in body:
            if not isinstance(body["enabled"], bool):
                raise ApiError.validation("enabled must be a boolean", ["enabled"])
            reenabled = body["enabled"] and not hook["enabled"]
            hook["enabled"] = body["enabled"]
        return Reply.json(200, self.store.save_webhook(hook, reenabled=reenabled))

    def del_hook(self, call: Call) -> Reply:
        self.perm(call, "webhook_delete")
        hook = self._hook(call)
        self.store.delete_webhook(hook["webhook_id"])
        return Reply(204)


def _query_list(values: list[str]) -> list[str]:
    """Repeated keys, or one JSON array: SDK 2.0.18 sends `labels=["a", "b"]` (query_encoder)."""
    out: list[str] = []
    for value in values:
        if value.startswith("["):
            try:
                decoded = json.loads(value)
            except ValueError:
                decoded = None
            if isinstance(decoded, list) and all(isinstance(v, str) for v in decoded):
                out.extend(decoded)
                continue
        out.append(value)
    return out


def _opt_str(body: dict, name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise ApiError.validation(f"{name} must be a string", [name])
    return value


def _client_id(body: dict) -> str | None:
    client_id = _opt_str(body, "client_id")
    if client_id is not None and not CLIENT_ID_RE.fullmatch(client_id):
        raise ApiError.validation(
            "client_id must be 1-256 characters from A-Z a-z 0-9 - . _ ~", ["client_id"]
        )
    return client_id


def _addresses(body: dict, name: str) -> list[str]:
    value = body.get(name)
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v for v in value if v.strip()]
    raise ApiError.validation(f"{name} must be a string or a list of strings", [name])


def _str_list(body: dict, name: str) -> list[str]:
    value = body.get(name)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise ApiError.validation(f"{name} must be a string or a list of strings", [name])


def _event_types(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ApiError.validation("event_types must be a list of strings", ["event_types"])
    unknown = [v for v in value if v not in EVENT_TYPES]
    if unknown:
        raise ApiError.validation(f"Unknown event types: {', '.join(unknown)}", ["event_types"])
    return _unique(value)


def _attachments(value: Any) -> list[dict]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ApiError.validation("attachments must be a list of objects", ["attachments"])
    out = []
    for item in value:
        content = item.get("content") or ""
        entry = {"attachment_id": str(uuid.uuid4()), "size": len(content) * 3 // 4}
        for name in ("filename", "content_type", "content_disposition", "content_id"):
            if item.get(name) is not None:
                entry[name] = item[name]
        out.append(entry)
    return out


def _bare(value: str) -> str:
    value = value.strip()
    if value.endswith(">") and "<" in value:
        value = value[value.rindex("<") + 1 : -1]
    return value.strip().lower()


def _unique(values: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for value in values:
        key = _bare(value)
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


def _prefixed(prefix: str, subject: str | None) -> str:
    subject = subject or ""
    if subject.lower().startswith(prefix.lower()):
        return subject
    return prefix + subject
