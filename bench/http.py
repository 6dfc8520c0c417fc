"""A real server (gunicorn, sync workers) and a load generator in a separate process."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from bench.common import REPO_ROOT, latency_summary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Gunicorn:
    """gunicorn on loopback with `workers` sync workers (2-3 per core is gunicorn's advice)."""

    def __init__(self, settings_module: str, *, workers: int = 3, env: dict | None = None):
        self.settings_module = settings_module
        self.workers = workers
        self.env = {**(env or os.environ), "DJANGO_SETTINGS_MODULE": settings_module}
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = None
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed in __exit__)
            prefix="bench-gunicorn-", suffix=".log", delete=False
        )

    @property
    def description(self) -> str:
        return f"gunicorn {self.workers} sync workers"

    def __enter__(self):
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "config.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(self.workers),
                "--worker-class",
                "sync",
                "--log-level",
                "warning",
                "--timeout",
                "60",
            ],
            cwd=REPO_ROOT,
            env=self.env,
            stdout=self.log,
            stderr=self.log,
        )
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited; see {self.log.name}")
            try:
                with urllib.request.urlopen(self.base + "/healthz", timeout=2) as r:  # noqa: S310
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"gunicorn did not answer; see {self.log.name}")
            time.sleep(0.1)
        return self

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        os.unlink(self.log.name)


def write_requests(path: str, requests: list[dict]) -> None:
    """Each request: {"method", "path", "headers", "body"} (body a str)."""
    with open(path, "w") as fh:
        for request in requests:
            fh.write(json.dumps(request) + "\n")


def load(
    base_url: str,
    *phases: list[dict],
    concurrency: int,
    timeout: float = 900,
    statuses: bool = False,
) -> list:
    """Send each phase's requests once, phase after phase, from one separate process with
    `concurrency` connections; returns one summary per phase (with `statuses`, also each
    request's status in the order of the phase's list)."""
    workdir = tempfile.mkdtemp(prefix="bench-load-")
    try:
        sources = []
        for i, requests in enumerate(phases):
            sources.append(os.path.join(workdir, f"phase{i}.jsonl"))
            write_requests(sources[-1], requests)
        out = os.path.join(workdir, "out.json")
        subprocess.run(
            [sys.executable, "-m", "bench.loadgen", base_url, str(concurrency), out, *sources],
            cwd=REPO_ROOT,
            check=True,
            timeout=timeout,
        )
        with open(out) as fh:
            raw_phases = json.load(fh)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return [
        _summary(raw, len(requests), statuses)
        for raw, requests in zip(raw_phases, phases, strict=True)
    ]


def _summary(raw: dict, count: int, in_order: bool = False) -> dict:
    latencies = [r[1] for r in raw["results"]]
    statuses: dict[str, int] = {}
    for status, _ in raw["results"]:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    ok = sum(v for k, v in statuses.items() if k.startswith("2"))
    summary = {
        "requests": count,
        "ok": ok,
        "statuses": statuses,
        "elapsed_s": round(raw["elapsed"], 3),
        "per_s": round(count / raw["elapsed"], 1),
        "latency": latency_summary(latencies),
        "bodies": raw.get("bodies", []),
    }
    if in_order:
        summary["statuses_in_order"] = [status for status, _ in raw["results"]]
    return summary
