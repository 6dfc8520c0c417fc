"""An email backend for django-post-office runs: waits the provider latency, records each send.

Each process appends the subject (unique per queued email) to its own ledger file, so duplicates
are counted from what the "provider" really received, as the sandbox ledger does for Countersign.
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
