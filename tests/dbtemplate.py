"""One migrated database per test session, copied instead of migrated again.

Migrating the schema costs about 10 s of CPU in Python and as much again in PostgreSQL. Under
pytest-xdist every worker used to migrate its own test database, and the harnesses that need a
database of their own (the nemesis, the broadcast crash test, the restore drill) migrated theirs
too. Now the first worker to get here migrates a template database, named after a digest of every
migration file, and each worker's test database and each harness's database is a
``CREATE DATABASE ... TEMPLATE`` copy of it (a file copy in PostgreSQL, well under a second).

A template is built under a name of its own and renamed only when its migration finished, so a
worker that died half-way leaves nothing another worker could copy. A PostgreSQL advisory lock
(taken on the server's ``postgres`` database) makes the workers build it once between them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import quote

import django
import psycopg
from django.conf import settings
from django.core.management import call_command
from django.db import connections
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "test_countersign_tpl_"
# An arbitrary constant: the advisory lock the workers take while one builds the template.
LOCK_KEY = 0x436F756E  # "Coun"


def admin_url(database: str = "postgres") -> str:
    """A URL for ``database`` on the test session's PostgreSQL server, as the test user."""
    s = connections["default"].settings_dict
    user, password = quote(s["USER"] or "", safe=""), quote(s["PASSWORD"] or "", safe="")
    host = s["HOST"] or s["OPTIONS"].get("host", "")
    port = f"&port={s['PORT']}" if s["PORT"] else ""
    return f"postgresql://{user}:{password}@/{database}?host={quote(host, safe='')}{port}"


def migrations_digest() -> str:
    """A digest of every migration file of the project and of the Django that runs them."""
    digest = hashlib.sha256(django.get_version().encode())
    for path in sorted(ROOT.glob("*/migrations/*.py")):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def template_name() -> str:
    return PREFIX + migrations_digest()


def _exists(admin: psycopg.Connection, name: str) -> bool:
    row = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
    return row is not None


def exists(name: str) -> bool:
    with psycopg.connect(admin_url(), autocommit=True) as admin:
        return _exists(admin, name)


# Templates of other migration digests kept beside this one: another checkout on the same server
# (a second worktree, a branch with a migration of its own) builds its own, and a test session
# that dropped every other template dropped the one that checkout's workers were copying, failing
# every test of its session. Older ones than these are a checkout's earlier schemas.
OTHER_TEMPLATES_KEPT = 3


def _drop_other_templates(
    admin: psycopg.Connection, *, keep: str, kept: int = OTHER_TEMPLATES_KEPT
) -> None:
    """Drop the templates of other migration digests but the newest ``kept`` (their databases'
    oids grow with their creation)."""
    rows = admin.execute(
        "SELECT datname FROM pg_database WHERE starts_with(datname, %s) AND datname <> %s "
        "AND right(datname, 9) <> '_building' ORDER BY oid DESC OFFSET %s",
        [PREFIX, keep, kept],
    ).fetchall()
    for (stale,) in rows:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(stale))
        )


def _migrate_into(name: str) -> None:
    """Run the project's migrations on database ``name`` through the default connection."""
    connection = connections["default"]
    previous = connection.settings_dict["NAME"]
    connection.close()
    connection.settings_dict["NAME"] = settings.DATABASES["default"]["NAME"] = name
    try:
        call_command("migrate", verbosity=0, interactive=False, run_syncdb=True)
        call_command("createcachetable", verbosity=0)
    finally:
        connection.close()
        connection.settings_dict["NAME"] = settings.DATABASES["default"]["NAME"] = previous


def ensure_template() -> str:
    """The name of a migrated template database for this checkout's migrations, built if needed."""
    name = template_name()
    with psycopg.connect(admin_url(), autocommit=True) as admin:
        admin.execute("SELECT pg_advisory_lock(%s)", [LOCK_KEY])
        try:
            if not _exists(admin, name):
                _drop_other_templates(admin, keep=name)
                building = name + "_building"
                admin.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(building)
                    )
                )
                admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(building)))
                _migrate_into(building)
                admin.execute(
                    sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                        sql.Identifier(building), sql.Identifier(name)
                    )
                )
        finally:
            admin.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])
    return name


def copy_template(target: str) -> None:
    """(Re)create database ``target`` as a copy of the migrated template."""
    template = ensure_template()
    with psycopg.connect(admin_url(), autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(target))
        )
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(target), sql.Identifier(template)
            )
        )


def drop(target: str) -> None:
    with psycopg.connect(admin_url(), autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(target))
        )


def satellite_name(target: str, what: str) -> str:
    """The name of a database a test session makes beside its test database ``target``: two
    underscores, so that no other database of the server starts with ``target + "__"`` (the
    templates are ``test_countersign_tpl_...`` and the xdist workers' ``test_countersign_gw0``,
    both of which start with the default name and one underscore)."""
    return f"{target}__{what}"


def satellites(target: str) -> list[str]:
    """The databases an earlier session's tests made beside ``target`` (``satellite_name``, and
    the ``<target>_unmigrated_...`` of the checkouts before it)."""
    with psycopg.connect(admin_url(), autocommit=True) as admin:
        return [
            row[0]
            for row in admin.execute(
                "SELECT datname FROM pg_database WHERE starts_with(datname, %s) "
                "OR starts_with(datname, %s)",
                [satellite_name(target, ""), f"{target}_unmigrated_"],
            )
        ]


def drop_satellites(target: str) -> None:
    """Drop ``satellites(target)``, before this session makes its own."""
    for name in satellites(target):
        drop(name)
