"""Arguments of management commands, checked where argparse reads them, so a bad one is a usage
error naming the bound or the character (a CommandError from call_command) and nothing has run.

Numbers: ``--poll -1`` spun without pausing; a negative ``--batch`` failed inside every round,
forever; a huge one overflowed a query's bigint. Text: a byte that is not UTF-8 on the command line
reaches Python as a lone surrogate (``surrogateescape``), which psycopg cannot encode: a raw
UnicodeEncodeError from the first query.
"""

from __future__ import annotations

import argparse
import math
import re

from django.core import management
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections
from django.db.migrations.executor import MigrationExecutor

from common.text import control_in

# What ``float`` reads as no number at all; any other infinity came from a number too large for
# the type (``1e400``, or 5,000 digits: ``int`` refuses more than 4,300 digits, ``float`` rounds
# them to infinity), which is a bound to name, not "not a number".
NOT_FINITE = re.compile(r"\s*[-+]?(nan|inf|infinity)\s*", re.IGNORECASE)
WHOLE = re.compile(r"\s*[-+]?[0-9]+\s*")
# PostgreSQL's bigint, the widest id or count a query takes.
BIGINT_MOST = 2**63 - 1


def shown(value: str, most: int = 40) -> str:
    """``value`` as a message quotes it: a 5,000-character argument is cut, its length said."""
    if len(value) <= most:
        return repr(value)
    return f"{value[:most]!r}... ({len(value)} characters)"


def number(kind: type, *, least: float, above: bool = False, most: float | None = None):
    """An argparse type: ``kind`` at least ``least`` (or above it) and at most ``most``."""

    def parse(text: str):
        if NOT_FINITE.fullmatch(text):
            raise argparse.ArgumentTypeError(f"{shown(text)} is not a number")
        try:
            value = kind(text)
        except ValueError:
            if not WHOLE.fullmatch(text):
                raise argparse.ArgumentTypeError(f"{shown(text)} is not a number") from None
            value = -math.inf if text.strip().startswith("-") else math.inf
        # A number that parsed is digits: quoted as typed, unless it is too long to read.
        typed = text if len(text) <= 40 else shown(text)
        if value < least or (above and value == least):
            bound = f"more than {_figure(least)}" if above else f"at least {_figure(least)}"
            raise argparse.ArgumentTypeError(f"{typed} is not allowed: it must be {bound}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(
                f"{typed} is not allowed: it must be at most {_figure(most)}"
            )
        if math.isinf(value):
            raise argparse.ArgumentTypeError(f"{typed} is not allowed: it is too large")
        return value

    return parse


def _figure(bound: float) -> str:
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


def identifier(text: str) -> int:
    """An argparse type for a row id: a whole number from 1 to PostgreSQL's bigint."""
    return number(int, least=1, most=BIGINT_MOST)(text)


def text(value: str) -> str:
    """An argparse type for free text that reaches the database, a URL or a message (an address,
    a slug): refused when it holds a control character (NUL included) or a byte that is not
    UTF-8. Not for file names, where such bytes are legitimate and the OS round-trips them."""
    found = control_in(value, tab=False)
    if found is None:
        return value
    code = int(found.removeprefix("U+"), 16)
    if 0xDC80 <= code <= 0xDCFF:
        byte = code - 0xDC00
        reason = f"the byte 0x{byte:02X}, which is not UTF-8 (check the terminal's encoding)"
    else:
        reason = f"{found}, a control character or an unpaired surrogate"
    raise argparse.ArgumentTypeError(f"it must be plain text but holds {reason}")


# Said of a password without quoting any of it, nor the byte.
PASSWORD_NOT_UTF8 = "The password holds a byte that is not UTF-8 (check the terminal's encoding)"


def password_not_utf8(password: str) -> bool:
    """Whether a password from the command line, a prompt or the environment holds a byte that
    is not UTF-8 (a lone surrogate to Python): the validators take it, the hasher cannot encode
    it (a UnicodeEncodeError once every question was answered)."""
    return any(0xD800 <= ord(char) <= 0xDFFF for char in password)


# --- an option given twice ----------------------------------------------------------------------
#
# argparse keeps the last value of an option given twice: ``tenant_suspend acme --reason fraud
# --reason test`` recorded "test", and a second --tenant, --intent or --slug acted on the second of
# two targets the operator typed. Every command of ours is built on ``BaseCommand`` below (or mixes
# ``OptionsOnce`` into the Django command it overrides), so the rule holds for all of them, and for
# Django's own options (--verbosity, --settings, --traceback...), in one place.
#
# Why here: argparse has resolved the option by the time it calls an action (``--reason=x``, an
# abbreviation like ``--rea``, ``-v2`` for --verbosity), so a second call is a second use whatever
# its spelling; scanning argv beforehand would re-implement that. The parser is built by Django's
# ``create_parser``, which offers no hook before its own options are added, so the actions are
# given their once-only class after it: the same objects stay in the parser's lists, its
# mutually exclusive groups and what ``call_command`` reads (``isinstance`` still holds).

# Actions that take one value or set one: a second use replaces the first. The others repeat on
# purpose (append, append_const, extend, count) or stop at once (help, version). A command's own
# Action class is left alone unless it subclasses one of these.
_ONCE_ONLY = (
    argparse._StoreAction,
    argparse._StoreConstAction,  # store_true and store_false subclass it
    argparse.BooleanOptionalAction,
)


class _Once(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        # One parse, one namespace: if this action last wrote to this one, it was given before.
        if getattr(self, "_given_in", None) is namespace:
            raise argparse.ArgumentError(self, "given twice; give it once")
        self._given_in = namespace
        super().__call__(parser, namespace, values, option_string)


_once_classes: dict[type, type] = {}


def _once_class(base: type) -> type:
    if base not in _once_classes:
        _once_classes[base] = type(f"Once{base.__name__}", (_Once, base), {})
    return _once_classes[base]


def options_once(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make every option of ``parser`` that takes or sets one value refuse a second use: a usage
    error naming it (exit status 2 from the command line, a CommandError from call_command),
    raised while parsing, so the command never runs."""
    for action in parser._actions:
        if (
            action.option_strings
            and isinstance(action, _ONCE_ONLY)
            and not isinstance(action, _Once)
        ):
            action.__class__ = _once_class(type(action))
    return parser


class OptionsOnce:
    """For a command class: its parser refuses an option given twice (see ``options_once``).
    Mixed in before the Django command it overrides, as ``createsuperuser`` does."""

    def create_parser(self, prog_name, subcommand, **kwargs):
        return options_once(super().create_parser(prog_name, subcommand, **kwargs))


# --- a database that is not migrated -----------------------------------------------------------
#
# Against a new server, a restore into an empty database, or a release whose ``migrate`` was not
# run yet, every command that touched the database ended in a ProgrammingError traceback
# ("relation "tenants_tenant" does not exist"), or ran on a schema older than its code. Django's
# ``requires_migrations_checks`` only prints a notice, then runs the command all the same.


class MigratedDatabase:
    """For a command class that reads or writes the database: refused in one line (a
    CommandError, exit status 1) before it runs when a migration of this code is not applied.
    Migrations the database has and this code does not know (a newer release's, during a rolling
    deploy, DEPLOYMENT.md "Upgrading") are no reason to refuse. A command that needs no migrated
    database (dbserver, the sandbox) sets ``requires_migrations_checks = False``."""

    requires_migrations_checks = True

    def waits_for_database(self, options: dict) -> bool:
        """Whether the command, run with ``options``, waits for a database that does not answer
        (a loop that rides out an outage); else it is refused in one line, as it would have
        ended in an OperationalError traceback at its first query."""
        return False

    def execute(self, *args, **options):
        self._waits_for_database = self.waits_for_database(options)
        return super().execute(*args, **options)

    def check_migrations(self):
        # A connection of its own, closed at once: a long-running command (the worker) keeps no
        # idle connection for it, and the one the command uses is left as it was.
        connection = connections.create_connection(DEFAULT_DB_ALIAS)
        try:
            plan = _unapplied(connection)
        except ImproperlyConfigured:  # no database configured
            return
        except OperationalError as error:
            if getattr(self, "_waits_for_database", False):
                return
            raise management.CommandError(
                f"PostgreSQL does not answer ({database_named(connection.settings_dict)}): "
                f"{_reason(error, connection.settings_dict)}; nothing was done."
            ) from None
        finally:
            connection.close()
        if plan:
            raise management.CommandError(
                f"The database is not migrated: {_described(plan)}. "
                "Run manage.py migrate first; nothing was done."
            )


def database_named(settings_dict: dict) -> str:
    """Which database a connection's settings name, without its user or password."""
    host = settings_dict.get("HOST") or settings_dict.get("OPTIONS", {}).get("host") or "localhost"
    port = f" port {settings_dict['PORT']}" if settings_dict.get("PORT") else ""
    return f"database {settings_dict.get('NAME')!r} at {host}{port}"


# libpq's connection parameters that hold a secret: the user's password, and the passphrase of
# the client's TLS key (sslkey names only the key's file). DATABASE_URL's query gives them as
# OPTIONS; ``dbserver url`` masks the same ones.
SECRET_PARAMETERS = frozenset({"password", "sslpassword"})
MASK = "********"


def _reason(error: Exception, settings_dict: dict) -> str:
    """The first line of psycopg's reason, with every secret of the connection's settings masked
    should it quote one."""
    reason = (str(error).strip() or type(error).__name__).splitlines()[0]
    options = settings_dict.get("OPTIONS") or {}
    secrets = {settings_dict.get("PASSWORD")} | {options.get(key) for key in SECRET_PARAMETERS}
    # The longest first: a password that holds another secret is masked whole.
    for secret in sorted((s for s in secrets if isinstance(s, str) and s), key=len, reverse=True):
        reason = reason.replace(secret, MASK)
    return reason


def _unapplied(connection) -> list:
    executor = MigrationExecutor(connection)
    return executor.migration_plan(executor.loader.graph.leaf_nodes())


def _described(plan: list) -> str:
    first = plan[0][0]
    count = (
        "1 migration of this release is not applied"
        if len(plan) == 1
        else f"{len(plan)} migrations of this release are not applied"
    )
    return f"{count}, from {first.app_label}.{first.name} on"


def migrations_missing(connection) -> str | None:
    """What this release's code misses in the database ``connection`` reaches ("3 migrations of
    this release are not applied, from intents.0031_... on"), or None when it misses nothing.
    As for the commands, migrations the database has and this code does not know are no reason."""
    plan = _unapplied(connection)
    return _described(plan) if plan else None


class BaseCommand(MigratedDatabase, OptionsOnce, management.BaseCommand):
    """What every management command of this project is built on."""
