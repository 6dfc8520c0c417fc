"""Where one worker's time goes: per-phase CPU of the real worker loop, and the SDK call alone.

One worker runs ``intents.sending.worker.run_rounds`` in this process until the queue is empty,
against the sandbox at 0 ms latency. The phases (claim, re-check and attempt rows, recording) are
timed by wrapping the package's own functions where they are looked up (``intents.sending.worker``,
and ``intents.sending.record``, whose ``intent_record_result`` records a lone accepted send) with a
thread-CPU timer (``time.thread_time``: the main thread only; the provider calls run in the pool
threads), and their SQL statements are counted with a Django execute wrapper. Separately, the same
provider call is made sequentially to give the CPU cost of one send through the official SDK.
Instrumentation only: nothing is replaced.
"""

from __future__ import annotations

import collections
import functools
import time
import uuid

from bench.common import (
    approved_intents,
    make_tenant,
    provision_mailboxes,
    reset_tables,
    vacuum_analyze,
)

PHASES = ("intent_claim", "intent_begin_attempts", "intent_record_accepted")
# Inside the re-check (intents.sending.precheck): the batch's locked read and the contract check;
# their CPU is taken out of intent_begin_attempts' own.
DETAIL = ("_lock_leased", "policy_problem")


def _instrument(modules, names, cpu, current):
    originals = {}
    for module in modules:
        for name in names:
            if hasattr(module, name):
                originals[module, name] = _wrap(module, name, cpu, current)
    return originals


def _wrap(module, name, cpu, current):
    original = getattr(module, name)

    @functools.wraps(original)
    def timed(*args, _original=original, _name=name, **kwargs):
        started = time.thread_time()
        current.append(_name)
        try:
            return _original(*args, **kwargs)
        finally:
            current.pop()
            spent = time.thread_time() - started
            cpu[_name] += spent
            if current:
                cpu[current[-1]] -= spent

    setattr(module, name, timed)
    return original


def _sdk_calls(mailbox, calls: int):
    """(thread CPU seconds, outcome counts) of ``calls`` sends through the SDK, one after another."""
    from mailboxes import provider

    api_key = mailbox.api_key()
    requests = [
        provider.SendRequest(
            inbox_id=mailbox.inbox_id,
            to=["customer@example.com"],
            cc=[],
            bcc=[],
            subject="Re: your order",
            text="Thanks",
            html="",
            labels=["cs-bench"],
            idempotency_key=f"cs-bench-sdk-{uuid.uuid4().hex}",
            reply_to_message_id="",
        )
        for _ in range(calls)
    ]
    sdk_before = time.thread_time()
    outcomes = collections.Counter(
        provider.send_message(api_key=api_key, request=r).outcome for r in requests
    )
    sdk_cpu = time.thread_time() - sdk_before
    return sdk_cpu, outcomes


def run(params: dict) -> dict:
    from django.conf import settings
    from django.db import connection

    from bench.dispatch import _configure_sending
    from intents.sending import precheck, record, worker
    from mailboxes.sandbox.testing import SandboxServer

    n, batch = params["n"], params.get("batch") or settings.SEND_BATCH_SIZE
    settings.SEND_RATE_PER_KEY = settings.SEND_BURST_PER_KEY = 1e6
    cpu: collections.Counter = collections.Counter()
    statements: collections.Counter = collections.Counter()
    current: list[str] = []

    def count(execute, sql, params_, many, context):
        statements[current[-1] if current else "other"] += 1
        return execute(sql, params_, many, context)

    with SandboxServer(config={"auto_deliver": False}) as sandbox:
        _configure_sending(sandbox)
        reset_tables()
        tenant, user = make_tenant()
        boxes = provision_mailboxes(tenant, 4, sandbox)
        approved_intents(tenant, user, boxes, n + batch)
        vacuum_analyze("intents_sendintent", "intents_draft", "intents_draftversion")
        worker.run_once(limit=batch)  # warm: connections, pools, prepared statements
        originals = _instrument((worker, record), PHASES, cpu, current)
        originals.update(_instrument((precheck,), DETAIL, cpu, current))
        try:
            main_before, process_before = time.thread_time(), time.process_time()
            with connection.execute_wrapper(count):
                done = worker.run_rounds(limit=batch)
            main_cpu = time.thread_time() - main_before
            process_cpu = time.process_time() - process_before
        finally:
            for (module, name), original in originals.items():
                setattr(module, name, original)

        # The SDK call alone, one after another on this thread.
        calls = max(50, min(500, n // 2))
        sdk_cpu, outcomes = _sdk_calls(boxes[0], calls)

    def per(seconds: float, items: int) -> float:
        return round(seconds * 1000 / max(1, items), 3)

    return {
        "intents": done,
        "batch": batch,
        "main_thread_cpu_ms": per(main_cpu, done),
        "process_cpu_ms": per(process_cpu, done),
        "call_threads_cpu_ms": per(process_cpu - main_cpu, done),
        "phases": {
            name: {"cpu_ms": per(cpu[name], done), "statements": round(statements[name] / done, 2)}
            for name in (*PHASES, *DETAIL)
        },
        "sdk_call_cpu_ms": per(sdk_cpu, calls),
        "sdk_calls": calls,
        "sdk_outcomes": {str(k): v for k, v in outcomes.items()},
    }
