"""Operator endpoints: liveness, readiness and Prometheus metrics.

``/metrics`` needs ``Authorization: Bearer $METRICS_TOKEN``; without a configured token it answers
404, so a deployment never exposes it by accident.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.db import BaseDatabaseCache
from django.db import OperationalError, connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

# config/ is at both ends of the house (DESIGN.md): this module and config.metrics are its top,
# entry points like the views, so they may read the domain apps' tables.
from common.cli import migrations_missing
from config.bounded import ReadTimedOut, bounded_reads
from config.metrics import exposition

# Whether this process has seen every migration of its code applied: then it stays so (the code
# does not change under a running process, and DEPLOYMENT.md "Upgrading" never unapplies one), so
# a probe pays for the migration graph only until the first time it finds nothing missing.
_migrated = False


def _migrations_missing() -> str | None:
    """What ``migrations_missing`` says, remembered once nothing is missing. A web host of a new
    release started before ``migrate`` ran answered every page with a 500 while /readyz said it
    was ready, so a load balancer sent users to it."""
    global _migrated
    if _migrated:
        return None
    missing = migrations_missing(connection)
    _migrated = missing is None
    return missing


# Whether this process has seen every database cache's table: then it stays so, as above.
_cache_tables_found = False


def _cache_tables_missing() -> list[str]:
    """The tables of the database caches (production's, settings.CACHES) that do not exist.
    ``migrate`` does not make them (``createcachetable`` does, DEPLOYMENT.md): without one the
    queue and every draft page answered 500 (the reviewers' content marks are kept in the cache)
    while /readyz said ready. One small query per table until they are all found."""
    global _cache_tables_found
    if _cache_tables_found:
        return []
    tables = [
        settings.CACHES[alias]["LOCATION"]
        for alias in settings.CACHES
        if isinstance(caches[alias], BaseDatabaseCache)
    ]
    missing = []
    if tables:  # development's and the tests' cache is in memory: no query
        with connection.cursor() as cursor:
            for table in tables:
                cursor.execute("SELECT to_regclass(%s)", [connection.ops.quote_name(table)])
                if cursor.fetchone()[0] is None:
                    missing.append(table)
    _cache_tables_found = not missing
    return missing


# GET or HEAD: load balancers probe with either, and a 405 reads as down.
@require_safe
@never_cache
def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


# Said of a check that needs the database when it did not answer: asking it again for each would
# wait out DB_CONNECT_TIMEOUT each time, with a host that takes connections and says nothing (a
# partition, a hung server): 30 s a probe, a web worker held for it, where a load balancer gives
# up after a few.
UNASKED = "error: not checked, the database did not answer"


def _database_caches() -> bool:
    return any(isinstance(caches[alias], BaseDatabaseCache) for alias in settings.CACHES)


@require_safe
@never_cache
def readyz(request: HttpRequest) -> HttpResponse:
    checks = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"error: {type(exc).__name__}"
    database = checks["database"] == "ok"
    try:
        if not database:
            checks["migrations"] = UNASKED
        elif missing := _migrations_missing():
            checks["migrations"] = f"error: {missing}"
        else:
            checks["migrations"] = "ok"
    except Exception as exc:
        checks["migrations"] = f"error: {type(exc).__name__}"
    try:
        if database or not _database_caches():
            missing_tables = _cache_tables_missing()
            checks["cache"] = (
                f"error: the cache table {', '.join(missing_tables)} does not exist; run "
                "manage.py createcachetable"
                if missing_tables
                else "ok"
            )
        else:
            checks["cache"] = UNASKED
    except Exception as exc:
        checks["cache"] = f"error: {type(exc).__name__}"
    try:
        if database or not settings.Q_CLUSTER.get("orm"):  # the ORM broker is that database
            from django_q.brokers import get_broker

            broker = get_broker()
            checks["broker"] = "ok" if broker.ping() else "error: no answer"
        else:
            checks["broker"] = UNASKED
    except Exception as exc:
        checks["broker"] = f"error: {type(exc).__name__}"
    ready = all(value == "ok" for value in checks.values())
    return JsonResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status=200 if ready else 503,
    )


def _authorised(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    if not token:
        raise Http404
    given = request.headers.get("Authorization", "")
    return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())


@require_safe
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    if not _authorised(request):
        return HttpResponse("unauthorised\n", status=401, content_type="text/plain")
    try:
        if missing := _migrations_missing():
            return HttpResponse(
                f"The database is not migrated: {missing}. Run manage.py migrate first.\n",
                status=503,
                content_type="text/plain",
            )
        with bounded_reads():
            body = exposition()
    except ReadTimedOut as exc:
        # Prometheus records the failed scrape (up == 0); the body is for whoever curls it.
        return HttpResponse(
            f"{exc.explained}; scrapes read the figures again once it ends.\n",
            status=503,
            content_type="text/plain",
        )
    except OperationalError as exc:
        # PostgreSQL down or refusing connections: a failed scrape all the same, said in one line
        # rather than Django's 500 page and a traceback on every scrape. The exception's text may
        # quote the connection's parameters, so only its kind is named, as /readyz does.
        return HttpResponse(
            f"PostgreSQL could not be reached ({type(exc).__name__}); /readyz says the same, "
            "and scrapes read the figures again once it answers.\n",
            status=503,
            content_type="text/plain",
        )
    # The format this endpoint always announced; every series name here is valid in it.
    return HttpResponse(body, content_type=CONTENT_TYPE_PLAIN_0_0_4)
