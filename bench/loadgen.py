"""Load generator: `python -m bench.loadgen BASE_URL CONCURRENCY OUT.json PHASE.jsonl...`.

Phases run one after the other in this one process (no interpreter start between them).

Closed loop: `concurrency` threads, each with its own keep-alive http.client connection
(reopened when the server closes it), take the next request from the file until none is left.
Records (status, seconds) per request and the first few response bodies of each status.
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from urllib.parse import urlsplit


def main(argv: list[str]) -> int:
    base, concurrency, out, sources = argv[0], int(argv[1]), argv[2], argv[3:]
    phases = []
    for source in sources:
        with open(source) as fh:
            phases.append(run_phase(base, [json.loads(line) for line in fh], concurrency))
    with open(out, "w") as fh:
        json.dump(phases, fh)
    return 0


def run_phase(base: str, requests: list[dict], concurrency: int) -> dict:
    parts = urlsplit(base)
    results: list = [None] * len(requests)
    bodies: dict[int, str] = {}
    position = iter(range(len(requests)))
    lock = threading.Lock()

    def run() -> None:
        conn = None
        while True:
            with lock:
                index = next(position, None)
            if index is None:
                break
            request = requests[index]
            body = request.get("body")
            for _ in range(1):  # no retry: every request is counted once, as sent
                if conn is None:
                    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
                started = time.perf_counter()
                try:
                    conn.request(
                        request["method"],
                        request["path"],
                        body=body.encode() if body is not None else None,
                        headers=request.get("headers", {}),
                    )
                    response = conn.getresponse()
                    data = response.read()
                    elapsed = time.perf_counter() - started
                    status = response.status
                    if response.will_close:
                        conn.close()
                        conn = None
                    break
                except (ConnectionError, http.client.HTTPException, OSError):
                    conn.close()
                    conn = None
                    status, elapsed, data = 0, time.perf_counter() - started, b""
            results[index] = (status, elapsed)
            if status not in bodies or status >= 400:
                with lock:
                    bodies.setdefault(status, data[:300].decode("utf-8", "replace"))
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=run) for _ in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return {
        "elapsed": elapsed,
        "results": results,
        "bodies": [{"status": k, "body": v} for k, v in sorted(bodies.items())],
    }


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
