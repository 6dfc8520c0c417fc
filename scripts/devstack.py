"""Run the whole app for a demo: sandbox AgentMail, web server, worker, demo agent.

Started by `make run` after set-up. Ctrl-C stops every process. Components whose management
command does not exist are skipped with a note, so the stack always starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WEB = os.environ.get("COUNTERSIGN_WEB_ADDR", "127.0.0.1:8000")
SANDBOX_PORT = os.environ.get("SANDBOX_PORT", "8025")

PROCESSES = [
    ("sandbox", ["sandbox", "--port", SANDBOX_PORT]),
    ("web", ["runserver", WEB, "--noreload"]),
    ("worker", ["qcluster"]),
    ("agent", ["demo_agent"]),
]


def available_commands() -> set[str]:
    output = subprocess.run(
        [sys.executable, "manage.py", "help", "--commands"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(output.split())


def wait_for_sandbox(base_url: str, timeout: float = 20.0) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base_url}/_sandbox/health", timeout=1):  # noqa: S310 - loopback
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"[devstack] the sandbox did not answer at {base_url}")


def main() -> int:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.setdefault("AGENTMAIL_BASE_URL", f"http://127.0.0.1:{SANDBOX_PORT}")
    commands = available_commands()
    children: list[tuple[str, subprocess.Popen]] = []
    for name, args in PROCESSES:
        if args[0] not in commands:
            print(f"[devstack] {name}: `manage.py {args[0]}` not available, skipped", flush=True)
            continue
        proc = subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT, env=env)
        children.append((name, proc))
        if name == "sandbox":
            wait_for_sandbox(env["AGENTMAIL_BASE_URL"])
            # The demo tenants' pods, inboxes, keys and webhooks live in the sandbox: provision them
            # now that it answers (idempotent, like the rest of seed_demo).
            subprocess.run(
                [sys.executable, "manage.py", "seed_demo"], cwd=ROOT, env=env, check=True
            )
    print(
        f"[devstack] Countersign is up: http://{WEB}/  (sign-ins in README.md; Ctrl-C stops)",
        flush=True,
    )

    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    exit_code = 0
    while not stopping:
        for name, proc in children:
            if proc.poll() is not None:
                print(f"[devstack] {name} exited with {proc.returncode}; stopping", flush=True)
                exit_code = proc.returncode or 1
                stopping = True
        time.sleep(0.5)
    for _, proc in children:
        if proc.poll() is None:
            proc.terminate()
    for _, proc in children:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
