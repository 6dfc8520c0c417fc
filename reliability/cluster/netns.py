"""Test hosts on one machine: a network namespace per host, each with one veth link into a bridge
that lives in a namespace of its own. No host has a default route, so nothing leaves them.

Names carry the run's id (`cs<id>-<host>`), so two runs at once (pytest-xdist, two engineers)
never meet; `cleanup_stale` removes the namespaces of runs whose process is gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from dataclasses import dataclass

SUBNET = "10.77.0"
NAME_RE = re.compile(r"^cs(\d+)-[a-z0-9]+$")


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    netns: str

    def prefix(self) -> tuple[str, ...]:
        """argv prefix that runs a command on this host, with the host's own name (for the
        `worker` column of the attempts)."""
        return (
            "ip",
            "netns",
            "exec",
            self.netns,
            "unshare",
            "--uts",
            "sh",
            "-c",
            'hostname "$0" && exec "$@"',
            self.name,
        )


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=30)


def in_ns(netns: str, *argv: str, check: bool = True, stdin: str | None = None):
    return subprocess.run(
        ["ip", "netns", "exec", netns, *argv],
        check=check,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=30,
    )


def plan(run_id: int, names: list[str]) -> dict[str, Host]:
    """Addresses: the control host (the harness) .1, then one per host in the order given."""
    return {
        name: Host(name=name, address=f"{SUBNET}.{index + 1}", netns=f"cs{run_id}-{name}")
        for index, name in enumerate(["ctl", *names])
    }


def bridge_ns(run_id: int) -> str:
    return f"cs{run_id}-bridge"


def build(run_id: int, hosts: dict[str, Host]) -> None:
    bridge = bridge_ns(run_id)
    sh("ip", "netns", "add", bridge)
    in_ns(bridge, "ip", "link", "add", "br0", "type", "bridge")
    in_ns(bridge, "ip", "link", "set", "br0", "up")
    for index, host in enumerate(hosts.values()):
        sh("ip", "netns", "add", host.netns)
        port = f"p{index}"
        in_ns(
            bridge,
            "ip",
            "link",
            "add",
            port,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            host.netns,
        )
        in_ns(bridge, "ip", "link", "set", port, "master", "br0", "up")
        in_ns(host.netns, "ip", "addr", "add", f"{host.address}/24", "dev", "eth0")
        in_ns(host.netns, "ip", "link", "set", "eth0", "up")
        in_ns(host.netns, "ip", "link", "set", "lo", "up")


def namespaces() -> list[str]:
    out = sh("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def destroy(run_id: int) -> list[str]:
    """Kill what still runs in the run's namespaces (only ours: they are named by the run), then
    delete them. Returns the names deleted."""
    mine = [name for name in namespaces() if name.startswith(f"cs{run_id}-")]
    for name in mine:
        for pid in sh("ip", "netns", "pids", name, check=False).stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
    for name in mine:
        sh("ip", "netns", "del", name, check=False)
    return mine


def cleanup_stale() -> list[int]:
    """Remove the namespaces of earlier runs whose harness process no longer exists."""
    stale = set()
    for name in namespaces():
        if (match := NAME_RE.match(name)) and not _alive(int(match.group(1))):
            stale.add(int(match.group(1)))
    for run_id in stale:
        destroy(run_id)
    return sorted(stale)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- faults ------------------------------------------------------------------------------------


def loss(host: Host, table: str, pct: int) -> None:
    """Drop `pct` % of the packets on the host's link, both ways, counted (see `dropped`)."""
    ruleset = (
        f"table inet {table} {{\n"
        f"  chain out {{ type filter hook output priority 0;"
        f' oifname "eth0" numgen random mod 100 < {pct} counter drop; }}\n'
        f"  chain in {{ type filter hook input priority 0;"
        f' iifname "eth0" numgen random mod 100 < {pct} counter drop; }}\n'
        "}\n"
    )
    in_ns(host.netns, "nft", "-f", "-", stdin=ruleset)


def dropped(host: Host, table: str) -> int:
    """Packets the loss rules of `table` dropped so far."""
    listed = in_ns(host.netns, "nft", "list", "table", "inet", table, check=False).stdout
    return sum(int(n) for n in re.findall(r"counter packets (\d+)", listed))


def partition(host: Host, table: str, peers: list[str] | None) -> None:
    """Drop the host's traffic to and from `peers` (None: every other host), in its own namespace,
    in an nftables table of the fault's own (so faults heal independently)."""
    match = f"ip daddr {{ {', '.join(peers)} }} " if peers else 'oifname "eth0" '
    back = f"ip saddr {{ {', '.join(peers)} }} " if peers else 'iifname "eth0" '
    ruleset = (
        f"table inet {table} {{\n"
        f"  chain out {{ type filter hook output priority 0; {match}drop; }}\n"
        f"  chain in {{ type filter hook input priority 0; {back}drop; }}\n"
        "}\n"
    )
    in_ns(host.netns, "nft", "-f", "-", stdin=ruleset)


def heal(host: Host, table: str) -> None:
    in_ns(host.netns, "nft", "delete", "table", "inet", table, check=False)
