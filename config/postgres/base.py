"""Django's PostgreSQL backend, with the connection health check spared right after a success.

With ``CONN_HEALTH_CHECKS`` Django sends ``SELECT 1`` before the first query of every request on
a persistent connection: a round trip to the server per request, and a sixth of the webhook
receiver's Python per event (0.66 -> 0.54 ms in process, BENCHMARKS.md). A connection that
served the previous request of this process without an error less than ``DB_HEALTH_CHECK_GRACE``
seconds ago (default 1) is used as it is; one that has been idle longer, or whose last request
hit a database error, is checked as before.

The trade, for operators: if the server drops connections (a restart, a failover, PgBouncer
reloading) within that second, the next request on each such connection fails once (an error
page, a 500 that Svix retries) and the connection is replaced at the end of that request, as
Django does for any connection that raised. ``DB_HEALTH_CHECK_GRACE=0`` checks every request.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.db.backends.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
    fine_at: float | None = None  # monotonic time the last request that used it ended cleanly

    def close_if_unusable_or_obsolete(self) -> None:
        # Called when a request starts and when it ends. ``health_check_done`` is set once a
        # request opened a cursor; with no error since, the connection just worked.
        worked = self.connection is not None and self.health_check_done and not self.errors_occurred
        super().close_if_unusable_or_obsolete()
        if self.connection is None:
            self.fine_at = None
        elif worked:
            self.fine_at = time.monotonic()

    def close_if_health_check_failed(self) -> None:
        if (
            self.connection is not None
            and not self.health_check_done  # type: ignore[has-type]
            and self.fine_at is not None
            and time.monotonic() - self.fine_at < settings.DB_HEALTH_CHECK_GRACE
        ):
            self.health_check_done = True
            return
        super().close_if_health_check_failed()
