"""The ``identity_provider`` fixture: tests/idp as a subprocess on a free loopback port, with a
fresh RSA signing key and client secret, and three people: a member of the tenant
(alice@acme.test), a newcomer in the tenant's domain (newbie@acme.test) and someone outside it
(eve@elsewhere.test). A plugin of tests/conftest.py."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parents[2]
IDP_PASSWORD = "idp-password-for-tests"
PEOPLE = {
    "alice": "alice@acme.test",
    "newbie": "newbie@acme.test",
    "eve": "eve@elsewhere.test",
}


@dataclass(frozen=True)
class IdentityProvider:
    issuer: str
    client_id: str
    client_secret: str
    password: str = IDP_PASSWORD


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rsa_private_key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _wait_until_up(issuer: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the test identity provider exited:\n{log.read_text()[-3000:]}")
        try:
            if (
                httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=2).status_code
                == 200
            ):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the test identity provider did not start:\n{log.read_text()[-3000:]}")


@pytest.fixture
def identity_provider(live_server, tmp_path):
    port = free_port()
    issuer = f"http://127.0.0.1:{port}/o"
    provider = IdentityProvider(
        issuer=issuer, client_id="countersign-tests", client_secret=secrets.token_urlsafe(32)
    )
    log = tmp_path / "idp.log"
    env = {
        **os.environ,
        "IDP_SECRET_KEY": secrets.token_urlsafe(32),
        "IDP_RSA_KEY": rsa_private_key_pem(),
        "IDP_ISSUER": issuer,
        "IDP_DB": str(tmp_path / "idp.sqlite3"),
        "IDP_PORT": str(port),
        "IDP_CLIENT_ID": provider.client_id,
        "IDP_CLIENT_SECRET": provider.client_secret,
        "IDP_REDIRECT_URI": f"{live_server.url}/sso/callback/",
        "IDP_USERS": ";".join(f"{u},{e},{IDP_PASSWORD}" for u, e in PEOPLE.items()),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.idp.serve"], cwd=ROOT, env=env, stdout=out, stderr=out
        )
    try:
        _wait_until_up(issuer, process, log)
        yield provider
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
