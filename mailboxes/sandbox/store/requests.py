"""The log of every `/v0` request (`GET /_sandbox/requests`)."""

from __future__ import annotations

import time

from ..records import Identity
from .core import Resource


class RequestLog(Resource):
    def log(
        self,
        *,
        method: str,
        path: str,
        route: str | None,
        identity: Identity | None,
        status: int,
        fault: str | None,
        idempotency_key: str | None,
        duration_ms: float,
    ) -> None:
        with self.lock:
            self.db.execute(
                "INSERT INTO requests (at, method, path, route, api_key_id, api_key_prefix, "
                "scope_type, status, fault, idempotency_key, duration_ms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    time.time(),
                    method,
                    path,
                    route,
                    identity.api_key_id if identity else None,
                    identity.prefix if identity else None,
                    identity.scope_type if identity else None,
                    status,
                    fault,
                    idempotency_key,
                    round(duration_ms, 3),
                ),
            )
