"""The cluster's link delay (reliability/cluster/forward.py), on loopback: a delayed host's egress
is held 200-800 ms a chunk, in order, the other direction is not, a delay set while a connection
is open applies to it, and the relay counts what it held."""

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from reliability.cluster import daemons
from reliability.cluster.faults import delays_held
from reliability.cluster.netns import Host

ROOT = Path(__file__).resolve().parents[2]
RELAY, CLIENT = "127.0.0.2", "127.0.0.3"
# Two loopback addresses, so that the relay can tell the client's host from its own.
pytestmark = pytest.mark.allow_hosts(["127.0.0.1", RELAY])


def echo_server() -> int:
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            conn, _ = server.accept()
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    def echo(conn):
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1]


def round_trip(sock: socket.socket, payload: bytes) -> float:
    began = time.monotonic()
    sock.sendall(payload)
    received = b""
    while len(received) < len(payload):
        received += sock.recv(65536)
    assert received == payload
    return time.monotonic() - began


def set_delays(path: Path, table: dict) -> None:
    path.write_text(json.dumps(table))
    time.sleep(0.3)  # the relay looks at the file at most every 0.1 s


@pytest.fixture
def relay(tmp_path):
    port = daemons.free_port(RELAY)
    delays, stats = tmp_path / "delays.json", tmp_path / "web1-relay.json"
    delays.write_text("{}")
    argv = [sys.executable, "-m", "reliability.cluster.forward", RELAY, str(port)]
    argv += [str(echo_server()), "--delays", str(delays), "--stats", str(stats)]
    proc = subprocess.Popen(argv, cwd=ROOT)
    try:
        daemons.wait_port(RELAY, port, proc=proc)
        with socket.create_connection((RELAY, port), source_address=(CLIENT, 0)) as sock:
            yield sock, delays, tmp_path
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_delayed_client_waits_200_to_800_ms_a_chunk_in_order_and_the_relay_counts_them(relay):
    sock, delays, folder = relay
    # The best of three: on a loaded machine one round trip through the relay's process took
    # 354 ms in CI, its scheduling and not a delay; no delay is set yet.
    undelayed = min(round_trip(sock, b"ping") for _ in range(3))
    # Set while the connection is open, as a link fault on a host with pooled connections.
    set_delays(delays, {CLIENT: [200, 800]})
    delayed = [round_trip(sock, f"chunk {i}".encode()) for i in range(5)]
    # Twenty chunks sent back to back come back whole and in order (a TCP stream).
    stream = b"".join(f"<{i:03d}>".encode() for i in range(20))
    for i in range(20):
        sock.sendall(stream[i * 5 : (i + 1) * 5])
        time.sleep(0.01)
    received = b""
    while len(received) < len(stream):
        received += sock.recv(65536)
    set_delays(delays, {})
    healed = min(round_trip(sock, b"pong") for _ in range(3))
    time.sleep(1.5)  # the stats file is rewritten every second
    held = delays_held(folder, {"w1": Host(name="w1", address=CLIENT, netns="-")})
    assert undelayed < 0.15
    # Each chunk waited at least its 200 ms; how long exactly the relay's own record says (the
    # mean below). The round trip adds the machine's scheduling on top, so it only bounds it
    # (0.955 s seen for an 800 ms delay in CI on a loaded VM).
    assert all(0.2 <= seconds < 1.4 for seconds in delayed), delayed
    assert received == stream
    assert healed < 0.15
    assert held["w1"]["chunks delayed"] >= 6
    assert 200 <= held["w1"]["mean delay ms"] <= 800


def test_a_delayed_server_host_slows_only_what_it_sends(relay):
    sock, delays, folder = relay
    set_delays(delays, {RELAY: [300, 300]})
    seconds = round_trip(sock, b"ping")
    time.sleep(1.5)
    stats = json.loads((folder / "web1-relay.json").read_text())
    # Delayed once (what the server host sends), not twice: the relay held one chunk, for its
    # 300 ms. The round trip's time tells that only on a quiet VM (0.46 s and 0.60 s seen in CI
    # under load, against 0.3 for once and 0.6 for twice), so it only bounds it here.
    assert 0.3 <= seconds < 1.2
    assert list(stats) == [RELAY]
    chunks, held_ms = stats[RELAY]
    assert chunks == 1 and 290 <= held_ms <= 400, stats
