"""Network faults between the hosts, at random (seeded) for the fault window; each heals by
itself after a few seconds, on a timer of its own."""

from __future__ import annotations

import contextlib
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

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
    netem_ok: bool | None = None
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
        if key in self.active:
            return
        self.serial += 1
        table = f"fault{self.serial}"
        netns.partition(host, table, peers)
        self.injected[name] += 1
        self.timeline.append((round(time.monotonic() - self.started, 1), f"{key} {seconds:.1f}s"))
        self._hold(key, seconds, lambda: netns.heal(host, table))

    def link(self) -> None:
        """200-800 ms delay (tc netem, when the kernel has it) and 5-20 % loss on one link."""
        host = self.rng.choice([h for n, h in self.hosts.items() if n not in ("ctl",)])
        key = f"link:{host.name}"
        if key in self.active:
            return
        delay, loss, seconds = (
            self.rng.randint(200, 800),
            self.rng.randint(5, 20),
            self.rng.uniform(3, 8),
        )
        if self.netem_ok is not False:
            try:
                netns.netem(host, delay_ms=delay, loss_pct=loss)
                self.netem_ok = True
            except Exception as exc:  # e.g. a kernel without sch_netem
                self.netem_ok = False
                self.log.append(
                    f"tc netem unavailable ({getattr(exc, 'stderr', exc)!s:.80}); loss by nftables only"
                )
        self.timeline.append((round(time.monotonic() - self.started, 1), f"{key} {seconds:.1f}s"))
        if self.netem_ok:
            self.injected["link delay+loss (netem)"] += 1
            self._hold(key, seconds, lambda: netns.netem_clear(host))
            return
        self.serial += 1
        table = f"fault{self.serial}"
        netns.in_ns(
            host.netns,
            "nft",
            "-f",
            "-",
            stdin=(
                f"table inet {table} {{\n chain out {{\n  type filter hook output priority 0;\n"
                f'  oifname "eth0" numgen random mod 100 < {loss} drop\n }}\n'
                f" chain in {{\n  type filter hook input priority 0;\n"
                f'  iifname "eth0" numgen random mod 100 < {loss} drop\n }}\n}}\n'
            ),
        )
        self.injected["link loss (nftables)"] += 1
        self._hold(key, seconds, lambda: netns.heal(host, table))

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

        kinds = [self.link, self.worker_db, self.worker_provider, self.broker, self.web]
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
        for host in self.hosts.values():
            netns.netem_clear(host)
            listed = netns.in_ns(host.netns, "nft", "list", "tables", check=False).stdout
            for line in listed.splitlines():
                if line.startswith("table inet fault"):
                    netns.heal(host, line.split()[-1])
