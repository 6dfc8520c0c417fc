"""Email backends for django-post-office runs.

- SleepBackend (the row the issue specified): waits the provider latency, records each send.
  Each process appends the subject (unique per queued email) to its own ledger file, so
  duplicates are counted from what the "provider" really received, as the sandbox ledger does
  for Countersign.
- AgentMailBackend (an additional, realistic row): what a team running post-office with
  AgentMail would write with the official SDK alone. It imports nothing of Countersign's; the
  bench task passes the sandbox's base URL, the inbox id and its key through the environment.
"""

from __future__ import annotations

import os
import threading
import time

from django.core.mail.backends.base import BaseEmailBackend

_lock = threading.Lock()


class SleepBackend(BaseEmailBackend):
    def send_messages(self, email_messages):
        latency = float(os.environ.get("BENCH_LATENCY_MS", "0")) / 1000
        ledger_dir = os.environ.get("BENCH_LEDGER_DIR")
        sent = 0
        for message in email_messages:
            if latency:
                time.sleep(latency)
            if ledger_dir:
                path = os.path.join(ledger_dir, f"sent-{os.getpid()}.txt")
                with _lock, open(path, "a") as ledger:
                    ledger.write(message.subject + "\n")
            sent += 1
        return sent


_clients: dict = {}
_clients_lock = threading.Lock()


def _client():
    """One SDK client over one pooled httpx.Client per process, shared by post-office's sending
    threads. Keyed by pid because post-office forks its sending processes: a pool (its sockets)
    must not cross a fork. The SDK is imported here, not at the top, so that SleepBackend's
    processes never pay for importing it."""
    import httpx
    from agentmail import AgentMail, AgentMailEnvironment

    pid = os.getpid()
    client = _clients.get(pid)
    if client is None:
        with _clients_lock:
            client = _clients.get(pid)
            if client is None:
                base = os.environ["BENCH_AGENTMAIL_BASE_URL"]
                client = _clients[pid] = AgentMail(
                    api_key=os.environ["BENCH_AGENTMAIL_API_KEY"],
                    environment=AgentMailEnvironment(
                        http=base, websockets=base.replace("http", "ws", 1)
                    ),
                    httpx_client=httpx.Client(timeout=30.0),
                )
    return client


class AgentMailBackend(BaseEmailBackend):
    """One `inboxes.messages.send` per message. No SDK retries (`max_retries: 0`): a retry
    without an idempotency key could send twice; a failure raises, and post-office marks the
    email failed (or requeues it, per its MAX_RETRIES)."""

    def send_messages(self, email_messages):
        client, inbox_id = _client(), os.environ["BENCH_AGENTMAIL_INBOX_ID"]
        for message in email_messages:
            client.inboxes.messages.send(
                inbox_id,
                to=list(message.to),
                subject=message.subject,
                text=message.body,
                request_options={"max_retries": 0},
            )
        return len(email_messages)
