"""Events (`message.sent`, `message.delivered`, ...) and their fan-out to matching webhooks."""

from __future__ import annotations

import json
import secrets
import time
import uuid

from ..errors import ApiError
from ..records import dumps
from .core import Core, Resource
from .webhooks import Webhooks

# The label a delivery event adds to the sent message (reference §2.4 lists labels on every
# message; which ones the real API sets for delivery is not documented, see the sandbox README).
DELIVERY_LABELS = {
    "message.delivered": "delivered",
    "message.bounced": "bounced",
    "message.complained": "complained",
    "message.rejected": "rejected",
}

# "Payloads are capped at 1 MB. When the cap is exceeded, `text` and `html` are omitted and the
# receiver must `GET` the message" (reference §5.3). The extracted bodies go with them: they are
# the same text again.
PAYLOAD_CAP_BYTES = 1_000_000
_BODIES = ("text", "html", "extracted_text", "extracted_html")


class Events(Resource):
    def __init__(self, core: Core, webhooks: Webhooks):
        super().__init__(core)
        self.webhooks = webhooks

    def emit(
        self,
        event_type: str,
        key: str | None,
        obj: dict,
        *,
        pod_id: str,
        inbox_id: str,
        delay: float = 0.0,
    ) -> str:
        """Store an event and queue its deliveries (inside the caller's transaction)."""
        event_id = "evt_" + uuid.uuid4().hex
        svix_id = "msg_" + secrets.token_urlsafe(18).replace("-", "x").replace("_", "y")
        payload: dict[str, object] = {
            "type": "event",
            "event_type": event_type,
            "event_id": event_id,
        }
        payload |= {key: obj} if key else obj
        body = dumps(payload)
        message = payload.get("message")
        if len(body.encode("utf-8")) > PAYLOAD_CAP_BYTES and isinstance(message, dict):
            payload["message"] = {k: v for k, v in message.items() if k not in _BODIES}
            body = dumps(payload)
        message_id = (obj.get("message") or obj).get("message_id")
        self.db.execute(
            "INSERT INTO events (event_id, svix_id, event_type, inbox_id, pod_id, message_id, "
            "body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (event_id, svix_id, event_type, inbox_id, pod_id, message_id, body, time.time()),
        )
        self._queue(event_id, svix_id, event_type, pod_id, inbox_id, due=time.time() + delay)
        if event_type in DELIVERY_LABELS and message_id:
            self._label(inbox_id, message_id, DELIVERY_LABELS[event_type])
        return event_id

    def _label(self, inbox_id: str, message_id: str, label: str) -> None:
        """A sent message's labels say how far its delivery got, as a lookup of it shows."""
        row = self.db.execute(
            "SELECT seq, doc FROM messages WHERE inbox_id=? AND message_id=?",
            (inbox_id, message_id),
        ).fetchone()
        if row is None:
            return
        doc = json.loads(row[1])
        if label in doc["labels"]:
            return
        doc["labels"] = [*doc["labels"], label]
        self.db.execute("UPDATE messages SET doc=? WHERE seq=?", (dumps(doc), row[0]))
        self.db.execute(
            "INSERT OR IGNORE INTO message_labels (inbox_id, label, message_seq) VALUES (?, ?, ?)",
            (inbox_id, label, row[0]),
        )

    def redeliver(self, *, svix_id: str | None, event_id: str | None) -> int:
        """Queue one more delivery of an already emitted event, with the same svix-id."""
        with self.lock, self.core.tx():
            row = self.db.execute(
                "SELECT event_id, svix_id, event_type, pod_id, inbox_id FROM events "
                "WHERE svix_id=? OR event_id=?",
                (svix_id, event_id),
            ).fetchone()
            if row is None:
                raise ApiError.not_found("Event")
            count = self._queue(row[0], row[1], row[2], row[3], row[4], due=time.time())
        self.core.on_enqueue()
        return count

    def _queue(
        self,
        event_id: str,
        svix_id: str,
        event_type: str,
        pod_id: str,
        inbox_id: str,
        *,
        due: float,
    ) -> int:
        count = 0
        for webhook in self.webhooks.all():
            if _webhook_matches(webhook, event_type, pod_id, inbox_id):
                self.db.execute(
                    "INSERT INTO deliveries (webhook_id, event_id, svix_id, event_type, status, "
                    "next_attempt_at) VALUES (?, ?, ?, ?, 'pending', ?)",
                    (webhook["webhook_id"], event_id, svix_id, event_type, due),
                )
                count += 1
        return count


def _webhook_matches(webhook: dict, event_type: str, pod_id: str, inbox_id: str) -> bool:
    if not webhook["enabled"] or event_type not in webhook.get("event_types", []):
        return False
    if webhook.get("inbox_id") and webhook["inbox_id"] != inbox_id:
        return False
    if webhook.get("pod_id") and webhook["pod_id"] != pod_id:
        return False
    pod_ids = webhook.get("pod_ids") or []
    inbox_ids = webhook.get("inbox_ids") or []
    if pod_ids or inbox_ids:
        return pod_id in pod_ids or inbox_id in inbox_ids
    return True
