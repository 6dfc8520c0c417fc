"""Loopback servers that answer agent event deliveries badly on purpose (test_hostile_receivers,
test_deadline)."""

from __future__ import annotations

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
