"""HTTP plumbing: routing of `/v0` requests through faults, auth and the request log, the
connection handler, and the process entry points. The `/_sandbox` control API is `control.py`."""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import Message as HeaderMap
from email.utils import formatdate
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote

from .api import Api, Call, Reply
from .control import Control
from .delivery import Dispatcher
from .errors import ApiError
from .faults import AFTER_MODES, Fault, FaultBook
from .store import Store

log = logging.getLogger("mailboxes.sandbox")

DEFAULT_ORG_KEY = "am_sandbox_org_key"
BAD_GATEWAY_HTML = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n"
)


@dataclass(slots=True)
class Outcome:
    """What the connection handler writes: a reply (None = drop the socket), maybe late, maybe
    one byte at a time (``drip``: seconds before each byte)."""

    reply: Reply | None
    sleep_before: float = 0.0
    drip: float = 0.0


class Sandbox:
    def __init__(self, db_path: str, org_key: str):
        self.dispatcher: Dispatcher | None = None
        self.store = Store(db_path, org_key, on_enqueue=self._wake)
        self.dispatcher = Dispatcher(self.store)
        self.faults = FaultBook()
        self.api = Api(self.store)
        self._routes: dict[tuple[str, int], list[tuple[list[str], str, Any]]] = {}
        for method, pattern, name, handler in self.api.routes:
            parts = pattern.split("/")
            self._routes.setdefault((method, len(parts)), []).append((parts, name, handler))
        self.control = Control(self.store, self.faults)

    def start(self) -> None:
        assert self.dispatcher is not None
        self.dispatcher.start()

    def close(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.stop()
        self.store.close()

    def _wake(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.wake()

    # -- request entry point ---------------------------------------------------------------------

    def handle(self, method: str, target: str, headers: HeaderMap, body: bytes) -> Outcome:
        started = time.perf_counter()
        raw_path, _, raw_query = target.partition("?")
        segments = [unquote(s) for s in raw_path.split("/")[1:]]
        query = parse_qs(raw_query, keep_blank_values=True)
        if segments and segments[0] == "_sandbox":
            return Outcome(self.control.handle(method, segments[1:], query, headers, body))
        call = Call(method, raw_path, {}, query, headers, body)
        route = None
        handler = None
        if segments and segments[0] == "v0":
            route, handler = self._match(method, segments[1:], call)
        call.identity, auth_error = self._authenticate(headers)
        fault = None
        if route is not None:
            fault = self.faults.take(route, call.params.get("inbox_id", "").lower() or None)
        outcome = Outcome(None)
        if fault is not None and fault.mode not in AFTER_MODES and fault.mode != "delay":
            outcome.reply = _fault_reply(fault)
        else:
            if fault is not None and fault.mode == "delay":
                time.sleep(fault.delay)
            try:
                if auth_error is not None:
                    raise auth_error
                if handler is None:
                    raise ApiError.not_found("Route")
                outcome.reply = handler(call)
            except ApiError as exc:
                outcome.reply = Reply.error(exc)
            except Exception:
                log.error("sandbox.request.crashed\n%s", traceback.format_exc())
                outcome.reply = Reply.error(ApiError(500, "internal_error", "Sandbox crashed"))
            if fault is not None and fault.mode in AFTER_MODES:
                outcome = _after_fault(fault, outcome.reply)
        self.store.requests.log(
            method=method,
            path=raw_path,
            route=route,
            identity=call.identity,
            status=outcome.reply.status if outcome.reply else 0,
            fault=fault.mode if fault else None,
            idempotency_key=headers.get("Idempotency-Key"),
            duration_ms=(time.perf_counter() - started) * 1000,
        )
        return outcome

    def _match(self, method: str, segments: list[str], call: Call) -> tuple[str | None, Any]:
        for parts, name, handler in self._routes.get((method, len(segments)), ()):
            params = {}
            for part, value in zip(parts, segments, strict=True):
                if part.startswith("{"):
                    params[part[1:-1]] = value
                elif part != value:
                    break
            else:
                call.params = params
                return name, handler
        return None, None

    def _authenticate(self, headers: HeaderMap) -> tuple[Any, ApiError | None]:
        value = headers.get("Authorization") or ""
        # The scheme is case-sensitive and the key may not contain whitespace (errors.mdx).
        token = value[7:] if value.startswith("Bearer ") else ""
        if not token or any(c.isspace() for c in token):
            return None, ApiError(401, "missing_authorization", "Missing or malformed API key")
        identity = self.store.keys.identity_for(token)
        if identity is None:
            return None, ApiError(401, "unknown_api_key", "Unknown or revoked API key")
        return identity, None


def _fault_reply(fault: Fault) -> Reply | None:
    mode = fault.mode
    if mode == "drop_before":
        return None
    if mode == "502_html":
        reply = Reply(502, BAD_GATEWAY_HTML, "text/html")
    elif mode == "422_unprocessable":
        reply = Reply.error(ApiError(422, "unprocessable", "The request could not be processed"))
    elif mode == "401_unknown_key":
        # The key refused as a revoked or deleted one is, without revoking it: a test can make
        # it work again by clearing the fault.
        reply = Reply.error(ApiError(401, "unknown_api_key", "Unknown or revoked API key"))
    elif mode == "gateway_403":
        # API Gateway's own rejection: no code, no docs (knowledge-base/api-403-error).
        reply = Reply.json(403, {"message": "Forbidden"})
    elif mode == "429":
        reply = Reply.error(ApiError(429, "rate_limit_exceeded", "Rate limit exceeded"))
        reply.headers["Retry-After"] = str(fault.retry_after if fault.retry_after else 1)
    elif mode == "409_in_progress":
        reply = Reply.error(
            ApiError.conflict(
                "A request with this idempotency key is still in progress; "
                "retry the identical request shortly"
            )
        )
    elif mode == "json_2xx_before":
        reply = Reply.json(200, fault.answer or {})
    elif mode == "503_before":
        reply = Reply.error(ApiError(503, "service_unavailable", "Service unavailable"))
    else:
        reply = Reply.error(ApiError(500, "internal_error", "Internal server error"))
    if fault.retry_after is not None:
        reply.headers["Retry-After"] = str(fault.retry_after)
    return reply


def _after_fault(fault: Fault, processed: Reply | None) -> Outcome:
    if fault.mode == "timeout_after_accept":
        return Outcome(processed, sleep_before=fault.delay)
    if fault.mode == "drop_after":
        return Outcome(None)
    if fault.mode == "drip_after":
        return Outcome(processed, drip=fault.delay)
    if fault.mode == "malformed_2xx":
        return Outcome(Reply.json(200, {"thread_id": "thd-malformed"}))
    if fault.mode == "html_2xx_after":
        return Outcome(Reply(200, b"<html><body>OK</body></html>", content_type="text/html"))
    if fault.mode == "json_2xx_after":
        if processed is None or processed.status != 200:
            return Outcome(processed)
        return Outcome(Reply.json(200, {**json.loads(processed.body), **(fault.answer or {})}))
    if fault.mode == "503_after":
        reply = Reply.error(ApiError(503, "service_unavailable", "Service unavailable"))
    else:
        reply = Reply.error(ApiError(500, "internal_error", "Internal server error"))
    if fault.retry_after is not None:
        reply.headers["Retry-After"] = str(fault.retry_after)
    return Outcome(reply)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "AgentMailSandbox/1.0"
    server: SandboxHTTPServer

    def setup(self) -> None:
        super().setup()
        # Keep-alive clients send small requests; Nagle plus delayed ACKs would add 40 ms each.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _dispatch(self) -> None:
        body = self._read_body()
        outcome = self.server.sandbox.handle(self.command, self.path, self.headers, body)
        if outcome.sleep_before:
            time.sleep(outcome.sleep_before)
        if outcome.reply is None:
            self.close_connection = True
            return
        reply = outcome.reply
        lines = [
            f"HTTP/1.1 {reply.status} {_phrase(reply.status)}",
            f"Server: {self.server_version}",
            f"Date: {formatdate(usegmt=True)}",
        ]
        if reply.status != 204:
            lines.append(f"Content-Type: {reply.content_type}")
        lines.append(f"Content-Length: {len(reply.body)}")
        lines += [f"{k}: {v}" for k, v in reply.headers.items()]
        if self.close_connection:
            lines.append("Connection: close")
        answer = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + reply.body
        try:
            if outcome.drip:
                self._drip(answer, outcome.drip)
            else:
                self.wfile.write(answer)
        except OSError:
            # The client gave up (the timeout_after_accept and drip_after faults rely on it).
            self.close_connection = True

    def _drip(self, answer: bytes, seconds: float) -> None:
        for index in range(len(answer)):
            time.sleep(seconds)
            self.wfile.write(answer[index : index + 1])
            self.wfile.flush()

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _dispatch


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


class SandboxHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512

    def __init__(self, address: tuple[str, int], sandbox: Sandbox):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.sandbox = sandbox
        super().__init__(address, Handler)


def _require_loopback(host: str) -> None:
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise SystemExit(f"refusing to bind {host}: the sandbox has an unauthenticated control API")


def build(host: str, port: int, db_path: str, org_key: str | None = None) -> SandboxHTTPServer:
    """A bound, not yet serving, sandbox server (its dispatcher is already running)."""
    _require_loopback(host)
    sandbox = Sandbox(db_path, org_key or DEFAULT_ORG_KEY)
    try:
        server = SandboxHTTPServer((host, port), sandbox)
    except BaseException:
        sandbox.close()
        raise
    sandbox.start()
    return server


def serve(
    host: str = "127.0.0.1",
    port: int = 8025,
    db_path: str = "sandbox.sqlite3",
    org_key: str | None = None,
) -> None:
    """Run the sandbox until SIGINT/SIGTERM. Prints one line with the URL once it listens."""
    run(build(host, port, db_path, org_key))


def run(server: SandboxHTTPServer) -> None:
    """Serve a built sandbox until SIGINT/SIGTERM, then close it."""
    bound_host, bound_port = server.server_address[:2]
    if isinstance(bound_host, bytes):  # typeshed allows bytes; an AF_INET(6) server has str
        bound_host = bound_host.decode()
    url_host = f"[{bound_host}]" if ":" in bound_host else bound_host
    print(f"AgentMail sandbox listening on http://{url_host}:{bound_port}", flush=True)

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        server.sandbox.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mailboxes.sandbox", description="Fake AgentMail HTTP API for tests/demo"
    )
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    parser.add_argument("--port", type=int, default=8025, help="0 picks a free port")
    parser.add_argument("--db", default="sandbox.sqlite3", help="SQLite file holding all state")
    parser.add_argument(
        "--org-key",
        default=os.environ.get("SANDBOX_ORG_KEY", DEFAULT_ORG_KEY),
        help="organization API key (env SANDBOX_ORG_KEY)",
    )
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    serve(args.host, args.port, args.db, args.org_key)
    return 0


__all__ = ["build", "main", "run", "serve"]
