"""A `/v0` request as the route handlers see it (`Call`), and what they answer (`Reply`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message as HeaderMap
from typing import Any

from ..errors import ApiError
from ..records import Identity, dumps


@dataclass(slots=True)
class Reply:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, obj: Any) -> Reply:
        try:
            return cls(status, dumps(obj).encode())
        except UnicodeEncodeError:
            # A lone surrogate (a fault's answer playing a hostile provider) exists only as a
            # JSON escape, "\ud800": written as one, not as UTF-8, which cannot hold it.
            return cls(status, json.dumps(obj, separators=(",", ":")).encode())

    @classmethod
    def error(cls, exc: ApiError) -> Reply:
        reply = cls.json(exc.status, exc.body())
        reply.headers.update(exc.headers)
        return reply


@dataclass(slots=True)
class Call:
    method: str
    path: str
    params: dict[str, str]
    query: dict[str, list[str]]
    headers: HeaderMap
    body: bytes
    identity: Identity | None = None
    _json: Any = None

    def json(self) -> dict:
        if self._json is None:
            if not self.body.strip():
                self._json = {}
            else:
                try:
                    self._json = json.loads(self.body)
                except ValueError as exc:
                    raise ApiError.validation(f"Request body is not valid JSON: {exc}") from exc
            if not isinstance(self._json, dict):
                raise ApiError.validation("Request body must be a JSON object")
        return self._json

    def q(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else None

    @property
    def who(self) -> Identity:
        assert self.identity is not None
        return self.identity


Handler = Callable[[Call], Reply]
