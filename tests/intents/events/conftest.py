"""Loopback servers that answer agent event deliveries badly on purpose (test_hostile_receivers,
test_deadline); the connections the process opens and fake resolver answers (test_egress*)."""

from __future__ import annotations

import socket

import pytest

from tests.raw_server import RawReceiver


@pytest.fixture
def raw_receiver():
    made: list[RawReceiver] = []

    def make(behave) -> RawReceiver:
        made.append(RawReceiver(behave))
        return made[-1]

    yield make
    for server in made:
        server.close()


@pytest.fixture
def connects(monkeypatch):
    """Every outgoing TCP connection the process opens (httpcore's sync backend uses
    socket.create_connection); the real call still happens, so only loopback is reachable."""
    seen: list[tuple] = []
    real = socket.create_connection

    def spy(address, *args, **kwargs):
        seen.append(address)
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", spy)
    return seen


@pytest.fixture
def resolver(monkeypatch):
    """resolver({"hooks.example.test": "10.0.0.5"}): fake answers for these names only."""
    real = socket.getaddrinfo

    def install(answers: dict[str, str]):
        def fake(host, port, *args, **kwargs):
            if host in answers:
                ip = answers[host]
                family = socket.AF_INET6 if ":" in ip else socket.AF_INET
                return [(family, socket.SOCK_STREAM, 6, "", (ip, port))]
            return real(host, port, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", fake)

    return install
