"""A command run against a database that is not migrated (a new server, a restore into an empty
database, a release whose ``migrate`` was not run yet) is refused in one line that says so, and
changes nothing. Every command that touched the database ended in a ProgrammingError traceback
("relation "tenants_tenant" does not exist"); Django's own check only printed a notice and ran
the command all the same."""

import io
import os
import subprocess
import sys
import time

import pytest
from django.core.management import CommandError, call_command, get_commands, load_command_class
from django.db import OperationalError, connections

from common.cli import MigratedDatabase, _reason
from tests import dbtemplate
from tests.dbtemplate import ROOT
from tests.ops.test_cli_repeated_options import project_commands

# The commands that need no migrated database of this deployment: dbserver manages the server
# itself, the sandbox keeps its own SQLite file, chaos runs on a scratch database of its own.
NO_DATABASE = {"dbserver", "sandbox", "chaos"}

ARGUMENTS = {
    "agentmail_recover": ["acme", "--check"],
    "attachment_storage_recount": [],
    "changepassword": ["ana@example.test"],
    "createsuperuser": ["--noinput", "--email", "root@example.test"],
    "demo_agent": ["--once", "--tenants", "acme", "--api-url", "http://127.0.0.1:9"],
    "intents_status": ["--intent", "1"],
    "intents_worker": ["--once"],
    "qcluster": ["--run-once"],
    "reencrypt_secrets": [],
    "seed_demo": [],
    "signin_unlock": ["ana@example.test"],
    "tenant_create": ["--name", "Acme", "--slug", "acme", "--admin-email", "ana@example.test"],
    "tenant_invite_admin": ["acme", "--email", "ana@example.test"],
    "tenant_resume": ["acme"],
    "tenant_storage_quota": ["acme", "--default"],
    "tenant_suspend": ["acme", "--reason", "fraud"],
    "two_factor_reset": ["ana@example.test"],
    "webhook_register": ["acme"],
    "webhooks_apply": ["--once"],
    "webhooks_backfill": [],
}


def test_every_command_is_tried_below():
    assert set(ARGUMENTS) | NO_DATABASE == set(project_commands())


def _tables(name: str) -> list[str]:
    import psycopg

    with psycopg.connect(dbtemplate.admin_url(name)) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
        ).fetchall()
    return [row[0] for row in rows]


@pytest.mark.parametrize("unmigrated", ["empty", "one-migration-behind"], indirect=True)
def test_no_command_runs_on_a_database_that_is_not_migrated(database, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # demo_agent's token file, were it to write one
    before = _tables(database)
    refused = {}
    for name, args in sorted(ARGUMENTS.items()):
        try:
            call_command(name, *args, stdout=io.StringIO(), stderr=io.StringIO())
        except CommandError as error:
            refused[name] = str(error)
        except Exception as error:  # what each command did instead, listed below
            refused[name] = f"{type(error).__name__}: {error}"
        else:
            refused[name] = "ran"

    assert {name for name, said in refused.items() if not _refusal(said)} == set(), refused
    assert _tables(database) == before


@pytest.mark.parametrize("unmigrated", ["empty"], indirect=True)
def test_the_database_server_command_works_on_an_unmigrated_database(database):
    out = io.StringIO()
    call_command("dbserver", "start", stdout=out)
    assert out.getvalue().startswith("PostgreSQL ready at ")


@pytest.mark.parametrize("unmigrated", ["empty"], indirect=True)
def test_from_the_command_line_it_is_one_line_and_exit_status_1(database):
    env = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env["DATABASE_URL"] = dbtemplate.admin_url(database)
    result = _suspend_from_the_command_line(env)
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert _refusal(result.stderr.strip().removeprefix("CommandError: "))


def _refusal(said: str) -> bool:
    return said.startswith("The database is not migrated: ") and said.endswith(
        "Run manage.py migrate first; nothing was done."
    )


@pytest.mark.parametrize("unmigrated", ["one-migration-behind"], indirect=True)
def test_the_refusal_names_the_migration_missing(database):
    from django.db.migrations.loader import MigrationLoader

    last = max(name for app, name in MigrationLoader(None).disk_migrations if app == "intents")
    with pytest.raises(CommandError) as refused:
        call_command("intents_status")
    assert str(refused.value) == (
        f"The database is not migrated: 1 migration of this release is not applied, "
        f"from intents.{last} on. Run manage.py migrate first; nothing was done."
    )


def test_the_django_q2_cluster_is_refused_too():
    """DEPLOYMENT.md "Upgrading": until ``migrate`` has run, every command of the new release,
    workers included, refuses to run. django-q2's own ``qcluster`` checked nothing: a worker
    host restarted before the migration ran the new release's tasks on the old schema."""
    command = load_command_class(get_commands()["qcluster"], "qcluster")
    assert isinstance(command, MigratedDatabase)
    assert command.requires_migrations_checks is True


def test_each_command_that_needs_no_database_says_so():
    for name in NO_DATABASE:
        command = load_command_class(get_commands()[name], name)
        assert command.requires_migrations_checks is False


# --- a database that does not answer --------------------------------------------------------------

PASSWORD = "hunter2-db-password"
# The loops wait for the database to come back (an outage, a restart): started while it is down,
# they keep waiting, as before. --once is one round: it has nothing to wait for.
LOOPS = {
    "intents_worker": ["--poll", "0.5"],
    "webhooks_apply": ["--poll", "0.5"],
    "demo_agent": ["--tenants", "none"],
}


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _suspend_from_the_command_line(env: dict[str, str], timeout: float = 120):
    """A one-shot command that needs the database, run as an operator runs it."""
    return subprocess.run(
        [sys.executable, "manage.py", "tenant_suspend", "acme", "--reason", "fraud"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _env_with_database(url: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env["DATABASE_URL"] = url
    return env


@pytest.fixture
def database_down(django_db_blocker):
    """The default connection pointed at a port of loopback where nothing listens."""
    connection = connections["default"]
    port = _closed_port()
    previous = {key: connection.settings_dict[key] for key in ("HOST", "PORT", "PASSWORD")}
    with django_db_blocker.unblock():
        connection.close()
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(port), PASSWORD=PASSWORD)
        try:
            yield port
        finally:
            connection.close()
            connection.settings_dict.update(previous)


def test_a_command_whose_database_does_not_answer_says_so_in_one_line(database_down, tmp_path):
    """Each was an OperationalError traceback of forty lines from the first query."""
    name = connections["default"].settings_dict["NAME"]
    said = {}
    for command, args in sorted(ARGUMENTS.items()):
        try:
            call_command(command, *args, stdout=io.StringIO(), stderr=io.StringIO())
        except CommandError as error:
            said[command] = str(error)
        except Exception as error:  # what each command did instead, listed below
            said[command] = f"{type(error).__name__}: {error}"
        else:
            said[command] = "ran"

    port = database_down
    assert said == dict.fromkeys(
        ARGUMENTS,
        f"PostgreSQL does not answer (database {name!r} at 127.0.0.1 port {port}): connection "
        f'failed: connection to server at "127.0.0.1", port {port} failed: Connection refused; '
        "nothing was done.",
    )


def test_from_the_command_line_a_database_that_does_not_answer_is_one_line_and_status_1():
    port = _closed_port()
    env = _env_with_database(f"postgres://countersign:{PASSWORD}@127.0.0.1:{port}/cs")
    result = _suspend_from_the_command_line(env)
    assert (result.returncode, result.stdout, result.stderr) == (
        1,
        "",
        f"CommandError: PostgreSQL does not answer (database 'cs' at 127.0.0.1 port {port}): "
        f'connection failed: connection to server at "127.0.0.1", port {port} failed: '
        "Connection refused; nothing was done.\n",
    )


@pytest.mark.parametrize(("command", "args"), LOOPS.items(), ids=LOOPS)
def test_a_loop_started_while_the_database_is_down_waits_for_it(command, args, tmp_path):
    """The loop says it is waiting, tries again, says so again and is still running: it did
    not exit on the first failed connection."""
    import queue
    import threading

    port = _closed_port()
    env = _env_with_database(f"postgres://countersign:{PASSWORD}@127.0.0.1:{port}/cs")
    if command == "demo_agent":
        args = [*args, "--token-file", str(tmp_path / "tokens.json")]
    process = subprocess.Popen(
        [sys.executable, "manage.py", command, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put(line) for line in process.stdout], daemon=True
    ).start()
    said, waits = [], 0
    try:
        deadline = time.monotonic() + 60
        while waits < 2 and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                continue
            said.append(line)
            waits += "database_unavailable" in line or line.startswith("[demo_agent] waiting")
        assert waits == 2, "".join(said)
        assert process.poll() is None, "".join(said)
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.parametrize(
    "settings_dict",
    [
        {"PASSWORD": PASSWORD},
        {"OPTIONS": {"password": PASSWORD}},
        # Found by probe 4 (the operator): the passphrase of the client's TLS key (libpq's
        # sslpassword, in DATABASE_URL's query) was quoted whole, where `dbserver url` masks it.
        {"PASSWORD": "another", "OPTIONS": {"sslpassword": PASSWORD}},
    ],
    ids=["password", "password-in-query", "key-passphrase"],
)
def test_the_reason_a_database_does_not_answer_never_quotes_a_secret(settings_dict):
    error = OperationalError(f'connection failed: could not use "{PASSWORD}": bad decrypt\nmore')

    assert _reason(error, settings_dict) == (
        'connection failed: could not use "********": bad decrypt'
    )


def test_a_database_that_takes_the_connection_and_never_answers_is_given_up_on():
    """A host that takes the TCP connection and then says nothing (a hung server, a proxy whose
    backend is gone, a firewall that eats the answer): libpq waits for the server's first
    message with no end, and the command hung with it. DB_CONNECT_TIMEOUT bounds the wait."""
    import socket
    import time

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nobody ever reads or writes
        port = silent.getsockname()[1]
        env = _env_with_database(f"postgres://countersign:{PASSWORD}@127.0.0.1:{port}/cs")
        env["DB_CONNECT_TIMEOUT"] = "2"
        started = time.monotonic()
        try:
            result = _suspend_from_the_command_line(env, timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the command still waited for the silent server after 30 s")
        took = time.monotonic() - started

    assert result.returncode == 1
    assert result.stderr.startswith(
        f"CommandError: PostgreSQL does not answer (database 'cs' at 127.0.0.1 port {port}): "
    )
    assert result.stderr.endswith("nothing was done.\n")
    assert PASSWORD not in result.stdout + result.stderr
    assert took < 20
