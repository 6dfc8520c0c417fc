"""The `Idempotency-Key` state machine of reference §8.3: in_progress, completed, failed."""

from __future__ import annotations

import time

from ..errors import ApiError
from .core import Resource


class IdempotencyKeys(Resource):
    def begin(self, key: str, fingerprint: str) -> tuple[int, bytes] | None:
        """Claim `key` for a new send, or answer from its stored result.

        Returns None when the caller must process the send (the key is now in_progress), or
        (status, body) to replay. Raises a 409 ApiError for the conflicting states of §8.3.
        """
        with self.lock:
            row = self.db.execute(
                "SELECT fingerprint, state, status, body, completed_at, failed_at "
                "FROM idempotency_keys WHERE key=?",
                (key,),
            ).fetchone()
            if row is not None:
                fp, state, status, body, completed_at, failed_at = row
                expired = (
                    state == "completed"
                    and completed_at + float(self.core.config["idempotency_ttl"]) < self.core.now()
                )
                failed_free = (
                    state == "failed"
                    and failed_at + float(self.core.config["failed_key_window"]) <= time.time()
                )
                if not (expired or failed_free):
                    if state == "completed" and fp == fingerprint:
                        return status, bytes(body)
                    if state == "completed":
                        raise ApiError.conflict(
                            "Idempotency key was already used for a different request; "
                            "generate a new key"
                        )
                    raise ApiError.conflict(
                        "A request with this idempotency key is still in progress; "
                        "retry the identical request shortly"
                    )
            self.db.execute(
                "INSERT OR REPLACE INTO idempotency_keys (key, fingerprint, state, created_at) "
                "VALUES (?, ?, 'in_progress', ?)",
                (key, fingerprint, self.core.now()),
            )
            return None

    def complete(self, key: str, response_body: bytes) -> None:
        """Store the result a replay answers with (inside the caller's transaction)."""
        self.db.execute(
            "UPDATE idempotency_keys SET state='completed', status=200, body=?, "
            "completed_at=? WHERE key=?",
            (response_body, self.core.now(), key),
        )

    def release(self, key: str) -> None:
        """Forget an in-progress key whose request ended in a deterministic error."""
        with self.lock:
            self.db.execute(
                "DELETE FROM idempotency_keys WHERE key=? AND state='in_progress'", (key,)
            )

    def fail(self, key: str) -> None:
        with self.lock:
            self.db.execute(
                "UPDATE idempotency_keys SET state='failed', failed_at=? "
                "WHERE key=? AND state='in_progress'",
                (time.time(), key),
            )

    def fail_interrupted(self) -> None:
        # A send that was mid-flight when the process died must not block its key forever:
        # it becomes "failed", which frees the key after failed_key_window.
        self.db.execute(
            "UPDATE idempotency_keys SET state='failed', failed_at=? WHERE state='in_progress'",
            (time.time(),),
        )
