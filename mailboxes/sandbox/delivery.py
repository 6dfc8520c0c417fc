"""Background delivery of Svix-signed webhooks (reference §8.4)."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from .store import Store

log = logging.getLogger("mailboxes.sandbox.delivery")


class Dispatcher:
    def __init__(self, store: Store, workers: int = 8):
        self.store = store
        self._cond = threading.Condition()
        self._dirty = True
        self._stopped = False
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox-hook")
        self._client: Any = None
        self._webhook: Any = None
        self._transport_error: type[Exception] = Exception
        self._thread = threading.Thread(target=self._run, name="sandbox-dispatch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        # A sandbox whose port could not be bound is closed before its dispatcher ever started.
        if self._thread.ident is not None:
            self._thread.join(timeout=0.5)
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._client is not None:
            self._client.close()

    def wake(self) -> None:
        with self._cond:
            self._dirty = True
            self._cond.notify_all()

    def _run(self) -> None:
        # svix pulls in its whole generated API client (over a second): importing it here keeps
        # the sandbox answering /_sandbox/health while deliveries wait for the import.
        import httpx
        from svix.webhooks import Webhook

        self._webhook = Webhook
        self._transport_error = httpx.HTTPError
        # trust_env=False: a proxy from the environment must never see loopback deliveries.
        self._client = httpx.Client(trust_env=False, follow_redirects=False)
        while True:
            with self._cond:
                if self._stopped:
                    return
                self._dirty = False
            try:
                due, next_at = self.store.webhooks.claim_due_deliveries()
            except Exception:
                log.exception("sandbox.delivery.claim_failed")
                due, next_at = [], None
            for delivery in due:
                self._pool.submit(self._attempt, delivery)
            with self._cond:
                if self._stopped:
                    return
                if not self._dirty and not due:
                    timeout = 1.0
                    if next_at is not None:
                        timeout = max(0.0, min(timeout, next_at - time.time()))
                    self._cond.wait(timeout)

    def _attempt(self, delivery: dict) -> None:
        body = delivery["body"]
        # Svix verifies against the header timestamp, so every attempt is signed afresh
        # while svix-id (and the event_id inside the body) stay the same.
        stamp = datetime.now(UTC)
        signature = self._webhook(delivery["secret"]).sign(delivery["svix_id"], stamp, body)
        headers = {
            **delivery["headers"],
            "content-type": "application/json",
            "user-agent": "Svix-Webhooks/1.0 (sandbox)",
            "svix-id": delivery["svix_id"],
            "svix-timestamp": str(int(stamp.timestamp())),
            "svix-signature": signature,
        }
        status_code = None
        error = None
        try:
            response = self._client.post(
                delivery["url"],
                content=body.encode(),
                headers=headers,
                timeout=float(self.store.config["webhook_timeout"]),
            )
            status_code = response.status_code
        except self._transport_error as exc:
            error = f"{type(exc).__name__}: {exc}"
        try:
            self.store.webhooks.record_attempt(delivery, status_code=status_code, error=error)
        except Exception:
            log.exception("sandbox.delivery.record_failed")
        self.wake()
