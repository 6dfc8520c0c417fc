"""Structured log lines: the dotted event name, then the ``extra={...}`` fields as key=value.

Fields whose names suggest a secret are masked, as a second line of defence: code must not pass
secrets or message bodies to a logger in the first place.
"""

from __future__ import annotations

import json
import logging
import re

from django.http import HttpRequest

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
_SENSITIVE = ("secret", "password", "api_key", "token", "authorization", "body", "text", "html")


def _masked(key: str) -> bool:
    """Whether a field's value is hidden. An id names a row and is never the secret itself: the
    operator needs ``token_id`` (which agent hit its rate limit) and ``secret_id`` (which webhook
    secret cannot be opened) to act on a line, and these were masked with the secrets."""
    name = key.lower()
    if name.endswith(("_id", "_ids")):
        return False
    return any(word in name for word in _SENSITIVE)


# A path whose segment is itself a secret: an invitation link (``/invitations/<token>/``;
# tenants.urls_invitations), as Django's request loggers write it for any answer of 400 or more
# (a 405 to a POST, a 500 on a database hiccup) while the invitation may still be open.
_SECRET_PATH = re.compile(r"(/invitations/)(?!\d+/)[^/\s'\"?#]+")


def _unsecret(text: str) -> str:
    return _SECRET_PATH.sub(r"\1[redacted]", text)


def _shown(value: object) -> object:
    """A field's value as the line shows it. Django's request loggers (``django.request``,
    ``django.security.*``) pass the request itself, whose repr is the full path with its query
    string: an SSO callback refused before its code was exchanged wrote the identity provider's
    unused authorization code and state there. The path alone says which page answered."""
    if isinstance(value, HttpRequest):
        return f"<{type(value).__name__}: {value.method} {_unsecret(value.path)!r}>"
    if isinstance(value, str):
        return _unsecret(value)
    return value


class KeyValueFormatter(logging.Formatter):
    def __init__(self, *, json_lines: bool = False):
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")
        self.json_lines = json_lines

    def format(self, record: logging.LogRecord) -> str:
        fields = {
            key: ("[redacted]" if _masked(key) else _shown(value))
            for key, value in record.__dict__.items()
            if key not in _STANDARD and not key.startswith("_")
        }
        if self.json_lines:
            payload = {
                "time": self.formatTime(record),
                "level": record.levelname,
                "logger": record.name,
                "event": _unsecret(record.getMessage()),
                **fields,
            }
            if record.exc_info:
                payload["exc"] = _unsecret(self.formatException(record.exc_info))
            return json.dumps(payload, default=str)
        line = _unsecret(super().format(record))
        if fields:
            line += " " + " ".join(f"{key}={value!r}" for key, value in sorted(fields.items()))
        return line
