"""The test template databases: another checkout's template on the same server is left alone."""

import psycopg
import pytest
from psycopg import sql

from tests import dbtemplate


# Marked slow so that `make test` runs it among the first tests (tests/conftest.py), while the
# server has little to write: each DROP DATABASE forces a checkpoint, and at the end of the run,
# where a test without a database was scheduled, its two checkpoints took 43 s (2 s alone).
@pytest.mark.slow
def test_the_newest_templates_of_other_digests_are_kept_and_older_ones_dropped(migrated_template):
    """Found running two worktrees' suites on one server: each session dropped every template
    but its own, the other session's workers lost the database they were copying, and 1,078 of
    its tests errored. Two of them, the newer kept: each DROP DATABASE forces a checkpoint,
    which under the suite's load took seconds each."""
    names = [f"{dbtemplate.PREFIX}zz_other_{i}" for i in range(2)]
    # This session's template, built if no test has yet: one still being built (its name ends
    # in "_building") would be taken below for another checkout's, and the test skipped.
    _, keep = migrated_template
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


@pytest.mark.django_db
def test_no_template_and_no_workers_database_is_a_satellite_of_the_default_name():
    """A session without xdist tests in ``test_countersign``, whose name begins the templates'
    (``test_countersign_tpl_...``) and the workers' (``test_countersign_gw0``): dropping every
    database that began with it and an underscore at its start (or end) dropped the template
    and a concurrent ``make test``'s databases."""
    from django.db import connection

    default = "test_countersign"
    names = dbtemplate.satellites(default)

    assert dbtemplate.exists(dbtemplate.template_name())
    assert dbtemplate.template_name() not in names
    assert connection.settings_dict["NAME"] not in names
    assert all(name.startswith((default + "__", default + "_unmigrated_")) for name in names)
