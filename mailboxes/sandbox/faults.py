"""Injectable provider failures (reference §8.5). Held in memory: a restart clears them."""

from __future__ import annotations

import itertools
import threading
from dataclasses import asdict, dataclass

from .errors import ApiError

# Modes answered without touching state.
BEFORE_MODES = frozenset(
    {
        "drop_before",
        "429",
        "500_before",
        "503_before",
        "502_html",
        "409_in_progress",
        "gateway_403",
        "401_unknown_key",
        "422_unprocessable",
        "delay",
        "json_2xx_before",
    }
)
# Modes applied after the request was fully processed (the send is in the ledger).
# `malformed_2xx` processes the send, then answers 200 without a message_id (an SDK-invisible
# shape failure the client must treat as uncertain).
# `html_2xx_after` processes the send, then answers 200 with a page that is not JSON (a gateway's
# "OK" page, a cut body): the SDK raises ApiError with status 200, which is uncertain too.
# `json_2xx_before` answers 200 with the fault's `answer` object and processes nothing (a provider
# that hands one key's answer to another request); `json_2xx_after` processes the send, then
# answers 200 with its real body updated by `answer` (a message id too long, another thread, extra
# fields). Either way the idempotency record keeps the real outcome: a replay gets the truth.
# `drip_after` processes the send, then writes its real answer one byte every `delay` seconds,
# status line and headers included: each read of the client's comes back inside any read timeout
# longer than `delay`, yet the whole answer takes hundreds of them (a broken proxy, a stalled
# link; only a deadline on the whole call ends it).
AFTER_MODES = frozenset(
    {
        "timeout_after_accept",
        "drip_after",
        "drop_after",
        "500_after",
        "503_after",
        "malformed_2xx",
        "html_2xx_after",
        "json_2xx_after",
    }
)
MODES = BEFORE_MODES | AFTER_MODES

SEND_ROUTES = frozenset({"send", "reply", "reply_all", "forward"})


@dataclass(slots=True)
class Fault:
    id: int
    route: str
    mode: str
    times: int
    nth: int
    retry_after: int | None
    delay: float
    inbox_id: str | None
    answer: dict | None = None
    seen: int = 0
    fired: int = 0

    def matches(self, route: str, inbox_id: str | None) -> bool:
        if self.inbox_id is not None and self.inbox_id != inbox_id:
            return False
        if self.route == "*":
            return True
        if self.route == "sends":
            return route in SEND_ROUTES
        return self.route == route

    @property
    def exhausted(self) -> bool:
        return self.times > 0 and self.fired >= self.times


class FaultBook:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._ids = itertools.count(1)

    def add(self, spec: dict) -> dict:
        mode = str(spec.get("mode", ""))
        if mode not in MODES:
            raise ApiError.validation(f"mode must be one of {', '.join(sorted(MODES))}", ["mode"])
        try:
            times = int(spec.get("times", 1))
            nth = int(spec.get("nth") or 1)
            retry_after = spec.get("retry_after")
            retry_after = None if retry_after is None else int(retry_after)
            delay = float(spec.get("delay", 10.0 if mode == "timeout_after_accept" else 1.0))
        except (TypeError, ValueError) as exc:
            raise ApiError.validation(f"Invalid fault: {exc}") from exc
        if times < 0 or nth < 1:
            raise ApiError.validation("times must be >= 0 and nth >= 1")
        answer = spec.get("answer")
        if answer is not None and not isinstance(answer, dict):
            raise ApiError.validation("answer must be a JSON object", ["answer"])
        fault = Fault(
            id=next(self._ids),
            route=str(spec.get("route", "*")),
            mode=mode,
            times=times,
            nth=nth,
            retry_after=retry_after,
            delay=delay,
            inbox_id=spec.get("inbox_id"),
            answer=answer,
        )
        with self._lock:
            self._faults.append(fault)
        return asdict(fault)

    def take(self, route: str, inbox_id: str | None) -> Fault | None:
        """The fault that fires on this call, if any; counts the call for every matching fault."""
        fired = None
        with self._lock:
            for fault in self._faults:
                if fault.exhausted or not fault.matches(route, inbox_id):
                    continue
                fault.seen += 1
                if fired is None and fault.seen >= fault.nth:
                    fault.fired += 1
                    fired = fault
        return fired

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def list(self) -> list[dict]:
        with self._lock:
            return [asdict(f) for f in self._faults]
