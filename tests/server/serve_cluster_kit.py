"""Two `kestrel serve` processes and two `kestrel worker` processes on one PostgreSQL database and
one shared data folder, as a load balancer would see them on several machines. Server A reaches
the database through a loopback relay the test can take down; server B and the workers reach it
directly."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from pg_kit import Relay
from server_kit import KESTREL, Server


def wait_until(check: Callable[[], object], timeout_s: float, what: str) -> object:
    """Poll `check` until it returns something truthy; fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def through(relay: Relay, url: str) -> str:
    """`url` with its port replaced by the relay's."""
    from psycopg.conninfo import conninfo_to_dict

    port = conninfo_to_dict(url).get("port") or 5432
    return url.replace(f":{port}/", f":{relay.port}/")


@dataclass
class ServeCluster:
    """The servers, the workers and what they share."""

    url: str
    tmp: Path
    relay: Relay
    servers: list[Server] = field(default_factory=list)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start_servers(self) -> None:
        """Server A (through the relay) and server B (direct), sharing one data folder."""
        for name in ("a", "b"):
            (self.tmp / name).mkdir()
        a = Server(self.tmp / "a")
        b = Server(self.tmp / "b")
        b.data, b.scripts, b.repos = a.data, a.scripts, a.repos
        a.env["KESTREL_STORE_URL"] = through(self.relay, self.url)
        b.env["KESTREL_STORE_URL"] = self.url
        self.servers = [a, b]
        for server in self.servers:
            server.start()

    def start_worker(self, tenant_slots: int = 1) -> None:
        """A worker on the servers' data folder; returns once it takes work."""
        a = self.servers[0]
        env = {**a.env, "KESTREL_STORE_URL": self.url, "KESTREL_DATA_DIR": str(a.data)}
        said = self.tmp / f"worker-{len(self.workers)}.log"
        argv = [*KESTREL, "worker", "--slots", "2", "--tenant-slots", str(tenant_slots)]
        with said.open("wb") as out:
            proc = subprocess.Popen(
                argv, env=env, cwd=self.tmp, stdout=out, stderr=subprocess.STDOUT
            )
        self.workers.append(proc)

        def ready() -> bool:
            assert proc.poll() is None, said.read_text()
            return ": ready" in said.read_text(errors="replace")

        wait_until(ready, 60, "a worker to start")

    def stop(self) -> None:
        """Stop every process."""
        for proc in self.workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for server in self.servers:
            server.stop()

    def executors_of(self, session_id: str) -> list[tuple[str, str]]:
        """(status, executor) of each run of the session on the durable queue."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT status, COALESCE(executor_id, '') FROM kestrel_dbos.workflow_status"
                " WHERE workflow_uuid LIKE %s ORDER BY created_at",
                (session_id + ":%",),
            ).fetchall()
        return [(str(status), str(executor)) for status, executor in rows]


def read_sse(
    client: httpx.Client, sid: str, headers: dict[str, str], until: Callable[[list], bool]
) -> list[tuple[str, object]]:
    """The stream's (id or 'status', event type or status) items until `until(items)`."""
    import json

    items: list[tuple[str, object]] = []
    kind = ""
    with client.stream("GET", f"/sessions/{sid}/events/stream", headers=headers) as answer:
        assert answer.status_code == 200, answer.read()
        for line in answer.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("id: "):
                items.append((line[4:], kind))
            elif line.startswith("data: ") and kind == "status":
                items.append(("status", json.loads(line[6:])["status"]))
            if items and until(items):
                return items
    return items


def approve_all(client: httpx.Client, sid: str, stop: Callable[[], bool]) -> None:
    """Allow every question the session asks, until `stop()`."""
    while not stop():
        for question in client.get(f"/sessions/{sid}/approvals").json():
            client.post(f"/sessions/{sid}/approvals/{question['call_id']}", json={"allow": True})
        time.sleep(0.2)
