"""The ops tests drive real sends through the sandbox with the intents tests' fixtures, build
history rows with the webhook tests' ones, and call the agent API with its tests' tokens; and
the databases a release has not migrated (``unmigrated``, ``database``), here so that the
session makes each once (a fixture imported into two modules is two fixtures)."""

import pytest
from django.db import connections
from psycopg import sql

from tests import dbtemplate
from tests.agent_api.conftest import make_token  # noqa: F401 (fixtures, used by name)
from tests.intents.conftest import fast_send, live  # noqa: F401
from tests.webhooks.conftest import hook_for, intent_row, mailbox_row  # noqa: F401


@pytest.fixture(scope="session")
def unmigrated(django_db_setup, django_db_blocker, request):
    """A database of the test server: empty, or a copy of the migrated template whose last
    migration of ``intents`` is not recorded as applied. Made once per kind for the session
    (the unmigrated CLI and probe tests use them) and not dropped here: ``DROP DATABASE``
    forces a checkpoint, which under the suite's load took a minute in one run and over five in
    another. It is named beside the worker's test database (``dbtemplate.satellite_name``), so
    the next session of that name drops it before it starts (tests/conftest.py; hence
    ``django_db_setup``, which these tests would not otherwise ask for)."""
    import psycopg

    kind = "empty" if request.param == "empty" else "behind"
    name = dbtemplate.satellite_name(
        connections["default"].creation._get_test_db_name(), f"unmigrated_{kind}"
    )
    with (
        django_db_blocker.unblock(),
        psycopg.connect(dbtemplate.admin_url(), autocommit=True) as admin,
    ):
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        if request.param == "empty":
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        else:
            admin.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(dbtemplate.ensure_template())
                )
            )
            with psycopg.connect(dbtemplate.admin_url(name), autocommit=True) as copy:
                copy.execute(
                    "DELETE FROM django_migrations WHERE id = (SELECT max(id) FROM "
                    "django_migrations WHERE app = 'intents')"
                )
    return name


@pytest.fixture
def database(unmigrated, django_db_blocker):
    """The default connection pointed at ``unmigrated`` for one test, and back after it."""
    connection = connections["default"]
    with django_db_blocker.unblock():
        previous = connection.settings_dict["NAME"]
        connection.close()
        connection.settings_dict["NAME"] = unmigrated
        try:
            yield unmigrated
        finally:
            connection.close()
            connection.settings_dict["NAME"] = previous
