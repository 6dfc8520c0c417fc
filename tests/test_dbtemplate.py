"""The test template databases: another checkout's template on the same server is left alone."""

import psycopg
import pytest
from psycopg import sql

from tests import dbtemplate


def test_the_newest_templates_of_other_digests_are_kept_and_older_ones_dropped():
    """Found running two worktrees' suites on one server: each session dropped every template
    but its own, the other session's workers lost the database they were copying, and 1,078 of
    its tests errored. Two of them, the newer kept: each DROP DATABASE forces a checkpoint,
    which under the suite's load took seconds each."""
    names = [f"{dbtemplate.PREFIX}zz_other_{i}" for i in range(2)]
    keep = dbtemplate.template_name()
    with psycopg.connect(dbtemplate.admin_url(), autocommit=True) as admin:
        others = admin.execute(
            "SELECT datname FROM pg_database WHERE starts_with(datname, %s) AND datname <> %s",
            [dbtemplate.PREFIX, keep],
        ).fetchall()
        if others:
            # The call below would drop the oldest of them: another checkout's, maybe in use.
            pytest.skip("templates of other checkouts are on this server")
        try:
            for name in names:  # oldest first
                admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

            dbtemplate._drop_other_templates(admin, keep=keep, kept=1)

            left = [
                row[0]
                for row in admin.execute(
                    "SELECT datname FROM pg_database WHERE starts_with(datname, %s) "
                    "ORDER BY datname",
                    [dbtemplate.PREFIX + "zz_other_"],
                )
            ]
        finally:
            for name in names:
                admin.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
    assert left == names[1:]
