"""Run the sandbox as a subprocess for tests, with a small client for its control API.

with SandboxServer() as sandbox:
    client = sandbox.sdk()                    # official agentmail SDK, org key
    sandbox.fault("send", "500_after")
    assert sandbox.ledger(idempotency_key="k")[0]["message_id"] == ...
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from .server import DEFAULT_ORG_KEY

REPO_ROOT = Path(__file__).resolve().parents[2]


class SandboxServer:
    """A sandbox process on a free loopback port with its own SQLite file.

    `base_url` has no `/v0`: the SDK's `AgentMailEnvironment(http=...)` appends `v0/...` itself.
    """

    def __init__(
        self,
        *,
        db_path: str | os.PathLike | None = None,
        org_key: str = DEFAULT_ORG_KEY,
        config: dict[str, Any] | None = None,
        startup_timeout: float = 15.0,
    ):
        self._tmpdir = None if db_path else tempfile.mkdtemp(prefix="agentmail-sandbox-")
        self.db_path = str(db_path or Path(self._tmpdir or ".") / "sandbox.sqlite3")
        self.log_path = str(Path(self.db_path).with_suffix(".log"))
        self.org_key = org_key
        self.port: int | None = None
        self.base_url = ""
        self.org_key_id = ""
        self.organization_id = ""
        self.default_pod_id = ""
        self._initial_config = config
        self._startup_timeout = startup_timeout
        self._process: subprocess.Popen | None = None
        self._http: httpx.Client | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> SandboxServer:
        # A free port is free when we look, not necessarily when the sandbox binds it: another
        # process (a parallel test's server) may take it in between. Then the sandbox exits, or
        # something else answers its health check; try again on another port.
        fixed = self.port is not None
        for tries_left in range(4, -1, -1):
            self.port = self.port or _free_port()
            try:
                return self._start_on_port()
            except _NotOurs:
                self.stop()
                if fixed or not tries_left:
                    raise RuntimeError(
                        f"port {self.port} is taken by another server; see {self.log_path}"
                    ) from None
                self.port = None
        raise AssertionError("unreachable")

    def _start_on_port(self) -> SandboxServer:
        env = {**os.environ, "PYTHONPATH": _pythonpath()}
        with open(self.log_path, "ab") as log:
            # Fixed argv built from our own values, no shell.
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "mailboxes.sandbox",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--db",
                    self.db_path,
                    "--org-key",
                    self.org_key,
                ],
                cwd=REPO_ROOT,
                env=env,
                stdout=log,
                stderr=log,
            )
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._http = httpx.Client(base_url=self.base_url, trust_env=False, timeout=10)
        self._wait_healthy()
        if self._initial_config:
            self.config(**self._initial_config)
            self._initial_config = None
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self._startup_timeout
        while True:
            if self._process is not None and self._process.poll() is not None:
                # Most often its port was taken before it could bind it (start tries another).
                raise _NotOurs(f"sandbox exited early; see {self.log_path}")
            try:
                health = self.health()
                ours = self._process.pid if self._process is not None else None
                if not isinstance(health, dict) or health.get("pid") != ours:
                    raise _NotOurs("another server answered the sandbox's health check")
                break
            except httpx.HTTPStatusError:
                raise _NotOurs("another server answered the sandbox's health check") from None
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"sandbox did not start; see {self.log_path}") from None
                time.sleep(0.05)
        self.org_key_id = health["org_key_id"]
        self.organization_id = health["organization_id"]
        self.default_pod_id = health["default_pod_id"]

    def stop(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=5)
            self._process = None

    def restart(self) -> None:
        """Stop and start again on the same port and database (state must survive)."""
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)

    def __enter__(self) -> SandboxServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- clients ---------------------------------------------------------------------------------

    def sdk(self, api_key: str | None = None, **kwargs: Any):
        """The official AgentMail SDK pointed at this sandbox (org key unless told otherwise)."""
        from agentmail import AgentMail, AgentMailEnvironment

        environment = AgentMailEnvironment(
            http=self.base_url, websockets=self.base_url.replace("http", "ws", 1)
        )
        return AgentMail(api_key=api_key or self.org_key, environment=environment, **kwargs)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        assert self._http is not None, "sandbox is not running"
        response = self._http.request(method, "/_sandbox/" + path, **kwargs)
        response.raise_for_status()
        return response.json()

    # -- control API -----------------------------------------------------------------------------

    def health(self) -> dict:
        return self._call("GET", "health")

    def fault(
        self,
        route: str,
        mode: str,
        *,
        times: int = 1,
        nth: int | None = None,
        retry_after: int | None = None,
        delay: float | None = None,
        inbox_id: str | None = None,
        answer: dict[str, Any] | None = None,
    ) -> dict:
        spec: dict[str, Any] = {"route": route, "mode": mode, "times": times}
        for name, value in (
            ("nth", nth),
            ("retry_after", retry_after),
            ("delay", delay),
            ("inbox_id", inbox_id),
            ("answer", answer),
        ):
            if value is not None:
                spec[name] = value
        return self._call("POST", "faults", json=spec)

    def faults(self) -> list[dict]:
        return self._call("GET", "faults")["faults"]

    def clear_faults(self) -> None:
        self._call("DELETE", "faults")

    def ledger(self, idempotency_key: str | None = None, **filters: str) -> list[dict]:
        if idempotency_key is not None:
            filters["idempotency_key"] = idempotency_key
        return self._call("GET", "ledger", params=filters)["sends"]

    def requests(self, **filters: Any) -> list[dict]:
        return self._call("GET", "requests", params=filters)["requests"]

    def clock(self) -> dict:
        return self._call("GET", "clock")

    def advance_clock(self, seconds: float) -> dict:
        return self._call("POST", "clock", json={"advance_seconds": seconds})

    def inbound(
        self,
        inbox_id: str,
        *,
        from_: str,
        subject: str = "",
        text: str | None = None,
        html: str | None = None,
        in_reply_to: str | None = None,
        **extra: Any,
    ) -> dict:
        body: dict[str, Any] = {"inbox_id": inbox_id, "from": from_, "subject": subject, **extra}
        if text is not None:
            body["text"] = text
        if html is not None:
            body["html"] = html
        if in_reply_to is not None:
            body["in_reply_to"] = in_reply_to
        return self._call("POST", "inbound", json=body)

    def trigger(
        self, message_id: str, event_type: str, recipients: list[str] | None = None, **extra: Any
    ) -> dict:
        body = {"message_id": message_id, "event_type": event_type, **extra}
        if recipients is not None:
            body["recipients"] = recipients
        return self._call("POST", "events", json=body)

    def events(self, **filters: str) -> list[dict]:
        return self._call("GET", "events", params=filters)["events"]

    def deliveries(self, **filters: str) -> list[dict]:
        return self._call("GET", "deliveries", params=filters)["attempts"]

    def redeliver(self, *, svix_id: str | None = None, event_id: str | None = None) -> int:
        return self._call("POST", "redeliver", json={"svix_id": svix_id, "event_id": event_id})[
            "queued"
        ]

    def suppressions(self) -> list[dict]:
        return self._call("GET", "suppressions")["suppressions"]

    def config(self, **changes: Any) -> dict:
        if not changes:
            return self._call("GET", "config")
        return self._call("POST", "config", json=changes)

    def reset(self) -> None:
        self._call("POST", "reset")

    def wait_for(self, predicate, timeout: float = 5.0, interval: float = 0.02):
        """Poll `predicate()` until it returns something truthy; return that value."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"condition not met within {timeout:.1f}s")
            time.sleep(interval)


class _NotOurs(RuntimeError):
    """The port the sandbox was to listen on answered as another server, or the sandbox exited."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pythonpath() -> str:
    existing = os.environ.get("PYTHONPATH")
    return str(REPO_ROOT) + (os.pathsep + existing if existing else "")
