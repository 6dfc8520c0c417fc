"""The ops endpoints on a database this release has not migrated: a web host of the new release
started before ``manage.py migrate`` ran (DEPLOYMENT.md "Upgrading"), or pointed at a restore
into an empty database. /readyz said ready and every page answered 500, so a load balancer sent
users to it; /metrics answered Django's 500 page with a traceback."""

import pytest
from django.db.migrations.loader import MigrationLoader

from config import ops

TOKEN = "metrics-test-token"


@pytest.fixture(autouse=True)
def not_yet_seen_migrated(monkeypatch):
    """A process remembers once it found every migration applied; each test here is a process
    that has not looked yet."""
    monkeypatch.setattr(ops, "_migrated", False)


def _last_intents_migration() -> str:
    return max(name for app, name in MigrationLoader(None).disk_migrations if app == "intents")


@pytest.mark.parametrize("unmigrated", ["one-migration-behind"], indirect=True)
def test_readyz_is_not_ready_and_names_the_migration_missing(database, client):
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "not ready",
        "checks": {
            "database": "ok",
            "migrations": "error: 1 migration of this release is not applied, from "
            f"intents.{_last_intents_migration()} on",
            "cache": "ok",
            "broker": "ok",
        },
    }


@pytest.mark.parametrize("unmigrated", ["empty"], indirect=True)
def test_metrics_on_an_empty_database_answers_503_saying_so(database, client, settings):
    settings.METRICS_TOKEN = TOKEN
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 503
    assert response.content.decode().startswith("The database is not migrated: ")
    assert " migrations of this release are not applied, from " in response.content.decode()
    assert response.content.decode().endswith(" on. Run manage.py migrate first.\n")


@pytest.mark.django_db
def test_readyz_on_a_migrated_database_says_so(client):
    response = client.get("/readyz")
    assert response.json()["checks"]["migrations"] == "ok"
