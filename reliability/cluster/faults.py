"""Network faults between the hosts, at random (seeded) for the fault window; each heals by
itself after a few seconds, on a timer of its own."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from reliability.cluster import netns
from reliability.cluster.netns import Host


@dataclass
class Nemesis:
    hosts: dict[str, Host]
    rng: random.Random
    interval: float
    stop: threading.Event = field(default_factory=threading.Event)
    injected: Counter = field(default_factory=Counter)
    log: list[str] = field(default_factory=list)
    timeline: list[tuple[float, str]] = field(default_factory=list)
    active: set[str] = field(default_factory=set)
    heals: list[threading.Thread] = field(default_factory=list)
    serial: int = 0
    spans: list[tuple[float, float, str]] = field(default_factory=list)  # epoch, seconds, kind
    delays_file: Path | None = None
    delayed: dict[str, list[int]] = field(default_factory=dict)
    delay_lock: threading.Lock = field(default_factory=threading.Lock)
    by_host: defaultdict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    started: float = field(default_factory=time.monotonic)

    def workers(self) -> list[Host]:
        return [h for n, h in self.hosts.items() if re.fullmatch(r"w\d+", n)]

    def webs(self) -> list[Host]:
        return [h for n, h in self.hosts.items() if n.startswith("web")]

    # -- one fault ----------------------------------------------------------------------------

    def _hold(self, key: str, seconds: float, heal) -> None:
        self.active.add(key)

        def later():
            time.sleep(seconds)
            with contextlib.suppress(Exception):
                heal()
            self.active.discard(key)

        thread = threading.Thread(target=later, daemon=True)
        thread.start()
        self.heals.append(thread)

    def _cut(self, name: str, host: Host, peers: list[str] | None, seconds: float) -> None:
        key = f"{name}:{host.name}"
        if not self._host_fault(key, name, seconds):
            return
        self.serial += 1
        table = f"fault{self.serial}"
        netns.partition(host, table, peers)
        self._hold(key, seconds, lambda: netns.heal(host, table))

    def _host_fault(self, key: str, kind: str, seconds: float, detail: str = "") -> bool:
        """Book a fault on one host (False if that host already has one of the kind)."""
        if key in self.active:
            return False
        self.injected[kind] += 1
        self.by_host[key.split(":", 1)[1]][kind] += 1
        self.spans.append((time.time(), seconds, kind))
        at = round(time.monotonic() - self.started, 1)
        self.timeline.append((at, f"{key} {seconds:.1f}s{detail}"))
        return True

    def link_loss(self) -> None:
        """5-20 % of the packets of one host's link dropped, both ways, in the kernel (nftables);
        the rule's counter says how many were dropped."""
        host = self.rng.choice([h for n, h in self.hosts.items() if n != "ctl"])
        loss, seconds = self.rng.randint(5, 20), self.rng.uniform(3, 8)
        if not self._host_fault(f"loss:{host.name}", "link loss", seconds, f" {loss}%"):
            return
        self.serial += 1
        table = f"fault{self.serial}"
        netns.loss(host, table, loss)

        def heal():
            self.by_host[host.name]["packets dropped"] += netns.dropped(host, table)
            netns.heal(host, table)

        self._hold(f"loss:{host.name}", seconds, heal)

    def link_delay(self) -> None:
        """200-800 ms on every chunk one host's link carries out (its egress), for a few seconds.
        This kernel has no netem: the relays in front of PgBouncer, Redis, the sandbox and
        gunicorn hold the chunks (forward.py), and count them per host."""
        if self.delays_file is None:
            return
        host = self.rng.choice([h for n, h in self.hosts.items() if n != "ctl"])
        seconds = self.rng.uniform(3, 8)
        if not self._host_fault(f"delay:{host.name}", "link delay", seconds, " 200-800ms"):
            return
        self._set_delay(host.address, [200, 800])
        self._hold(f"delay:{host.name}", seconds, lambda: self._set_delay(host.address, None))

    def _set_delay(self, address: str, span: list[int] | None) -> None:
        with self.delay_lock:
            if span is None:
                self.delayed.pop(address, None)
            else:
                self.delayed[address] = span
            assert self.delays_file is not None
            tmp = self.delays_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.delayed))
            os.replace(tmp, self.delays_file)

    def worker_db(self) -> None:
        """A worker cut from the database, preferably while it has sends in flight (after its
        provider calls, before it records them)."""
        from intents.models import SendIntent

        worker = self.rng.choice(self.workers())
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            busy = SendIntent.objects.filter(
                state="sending", lease_owner__startswith=f"{worker.name}:"
            ).exists()
            if busy:
                self.injected["worker<->db partition with sends in flight"] += 1
                break
            time.sleep(0.05)
        self._cut(
            "worker<->db partition", worker, [self.hosts["db"].address], self.rng.uniform(2, 7)
        )

    def worker_provider(self) -> None:
        worker = self.rng.choice(self.workers())
        peers = [self.hosts["provider"].address]
        self._cut("worker<->provider partition", worker, peers, self.rng.uniform(2, 7))

    def broker(self) -> None:
        self._cut("broker partition", self.hosts["broker"], None, self.rng.uniform(3, 8))

    def web(self) -> None:
        web = self.rng.choice(self.webs())
        self._cut("web host cut off", web, None, self.rng.uniform(3, 8))

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> None:
        from django.db import connections

        kinds = [
            self.link_delay,
            self.link_loss,
            self.worker_db,
            self.worker_provider,
            self.broker,
            self.web,
        ]
        schedule = self.rng.sample(kinds, len(kinds))
        while True:
            # Every kind once, even when a loaded machine makes each injection slow.
            if self.stop.wait(self.interval) and not schedule:
                return
            fault = schedule.pop() if schedule else self.rng.choice(kinds)
            try:
                fault()
            except Exception as exc:
                self.log.append(f"{fault.__name__}: {type(exc).__name__}: {exc}"[:300])
            finally:
                connections.close_all()

    def heal_all(self) -> None:
        self.stop.set()
        for thread in self.heals:
            thread.join(timeout=15)
        if self.delays_file is not None:
            for address in list(self.delayed):
                self._set_delay(address, None)
        for host in self.hosts.values():
            listed = netns.in_ns(host.netns, "nft", "list", "tables", check=False).stdout
            for line in listed.splitlines():
                if line.startswith("table inet fault"):
                    netns.heal(host, line.split()[-1])


def delays_held(folder: Path, hosts: dict[str, Host]) -> dict[str, dict]:
    """What the relays held, per delayed host: chunks and their mean delay (their stats files)."""
    name_of = {h.address: n for n, h in hosts.items()}
    held: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for path in folder.glob("*-relay.json"):
        with contextlib.suppress(OSError, ValueError):
            for address, (chunks, ms) in json.loads(path.read_text()).items():
                held[name_of.get(address, address)][0] += chunks
                held[name_of.get(address, address)][1] += ms
    return {
        name: {"chunks delayed": int(c), "mean delay ms": round(ms / c) if c else 0}
        for name, (c, ms) in sorted(held.items())
    }


def uncertain_by_fault(spans: list[tuple[float, float, str]], grace: float) -> dict[str, int]:
    """Intents that went `uncertain`, by the fault kinds active (on any host) when they did, a
    fault counting until `grace` seconds after it healed (a lease outlives the cut by that
    much); "no fault" when none was."""
    from intents.models import IntentEvent

    counts: Counter = Counter()
    moments = IntentEvent.objects.filter(to_state="uncertain").values_list("created_at", flat=True)
    for moment in moments:
        t = moment.timestamp()
        kinds = sorted({k for start, secs, k in spans if start <= t <= start + secs + grace})
        counts[" + ".join(kinds) or "no fault"] += 1
    return dict(counts.most_common())
