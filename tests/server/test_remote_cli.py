"""`kestrel sessions … --server URL`: the real `kestrel` command, run as a process, against a
real `kestrel serve` on loopback."""

from __future__ import annotations

import contextlib
import http.server
import json
import signal
import socket
import subprocess
import threading
from pathlib import Path

from server_kit import BASH_THEN_DONE, KESTREL, Server, wait_for

QUIET = [{"text": "Nothing to do."}]
PLANS = """
[solo]
tier = 1
max_concurrent_sessions = 1
max_queued_sessions = 0
allowed_models = ["scripted:*"]
max_wall_s = 600
"""


SERVER_OPTIONS = {"workers": 4, "plans": PLANS}
"""How this module's server runs (see conftest.py)."""


def _env(server: Server, token: str | None) -> dict[str, str]:
    home = server.tmp / "client-home"
    home.mkdir(exist_ok=True)
    env = {**server.env, "HOME": str(home), "COLUMNS": "200"}
    if token is not None:
        env["KESTREL_API_TOKEN"] = token
    return env


def kestrel(
    server: Server, token: str | None, *args: str, url: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`kestrel sessions ARGS --server URL`, run to its end."""
    argv = [*KESTREL, "sessions", *args, "--server", url or server.url]
    return subprocess.run(
        argv,
        env=_env(server, token),
        cwd=server.tmp,
        capture_output=True,
        text=True,
        timeout=240,
    )


def started(server: Server, token: str, *args: str) -> subprocess.Popen[str]:
    """`kestrel sessions ARGS --server URL`, running."""
    return subprocess.Popen(
        [*KESTREL, "sessions", *args, "--server", server.url],
        env=_env(server, token),
        cwd=server.tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_until(proc: subprocess.Popen[str], needle: str) -> list[str]:
    """The lines `proc` prints up to the first that holds `needle`."""
    assert proc.stdout is not None
    seen: list[str] = []
    for line in proc.stdout:
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"never printed {needle!r}: {''.join(seen)}")


def clean(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr


def test_create_follow_approve_list_show_diff_and_review(server: Server) -> None:
    token = server.token("cli-solo", plan="solo")
    client = server.client(token)
    script = server.script(BASH_THEN_DONE, "cli-asks.json")
    repo = server.repo("cli-path")
    creating = started(
        server, token, "create", "make a file", "--path", str(repo), "--model", script, "-f"
    )
    sid = read_until(creating, "")[0].strip()
    wait_for(client, sid, lambda v: v["waiting_on"] == "approval")
    read_until(creating, "waiting for approval of bash")

    over = kestrel(server, token, "create", "another", "--path", str(repo), "--model", script)
    assert over.returncode == 3, over.stderr  # The plan runs one session at a time.
    assert "HTTP 429" in over.stderr and "try again in" in over.stderr
    clean(over)

    watching = started(server, token, "follow", sid)
    read_until(watching, "waiting for approval of bash")
    watching.send_signal(signal.SIGINT)
    _, said = watching.communicate(timeout=60)
    assert watching.returncode == 130 and "Stopped following" in said
    assert "Traceback" not in said

    approved = kestrel(server, token, "approve", sid)
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.startswith("Allowed bash") and sid in approved.stdout
    out, err = creating.communicate(timeout=120)
    assert creating.returncode == 0, err
    assert "All done." in out and "── done" in out and "waits on review" in out
    assert "Traceback" not in err

    listed = kestrel(server, token, "list")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split()[:3] == ["id", "status", "waits"]
    assert row.split()[:3] == [sid, "done", "review"] and "make a file" in row
    rows = json.loads(kestrel(server, token, "list", "--json").stdout)
    assert [r["id"] for r in rows] == [sid]

    shown = kestrel(server, token, "show", sid)
    assert shown.returncode == 0, shown.stderr
    assert f"session {sid} · done · waits on review" in shown.stdout
    assert "task: make a file" in shown.stdout and "All done." in shown.stdout
    as_json = json.loads(kestrel(server, token, "show", sid, "--json").stdout)
    assert as_json["session"]["id"] == sid
    assert "session_finished" in [r["event"]["type"] for r in as_json["events"]]

    replayed = kestrel(server, token, "follow", sid)  # An idle session: its log, then the end.
    assert replayed.returncode == 0 and "All done." in replayed.stdout

    diff = kestrel(server, token, "diff", sid)
    assert diff.returncode == 0 and "+hi" in diff.stdout, diff.stderr
    applied = kestrel(server, token, "review", sid, "--apply")
    assert applied.returncode == 0, applied.stderr + applied.stdout
    assert [p.read_text() for p in (server.data / "checkouts").glob("*/made.txt")] == ["hi\n"]


def test_an_uploaded_repository_is_sent_as_it_is_now(server: Server, tmp_path: Path) -> None:
    token = server.token("cli-upload")
    local = tmp_path / "mine"
    local.mkdir()
    (local / "README.md").write_text("hello\n")
    (local / ".gitignore").write_text("*.log\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "first"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@e", *args], cwd=local, check=True
        )
    (local / "uploaded-not-committed.txt").write_text("fresh\n")
    (local / "noise.log").write_text("ignored\n")
    script = server.script(QUIET, "cli-upload.json")
    done = kestrel(server, token, "create", "look", "--upload", str(local), "--model", script, "-f")
    assert done.returncode == 0, done.stderr
    clean(done)
    sid = done.stdout.splitlines()[0]
    assert "Nothing to do." in done.stdout and f"Started session {sid}" in done.stderr
    (checkout,) = [
        p.parent for p in (server.data / "checkouts").glob("*/uploaded-not-committed.txt")
    ]
    assert (checkout / "README.md").read_text() == "hello\n"
    assert not (checkout / "noise.log").exists()


class DroppingProxy:
    """A TCP proxy on loopback in front of the server that can cut every open connection."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return
            far = socket.create_connection(("127.0.0.1", self.target))
            with self.lock:
                self.open += [near, far]
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for end in (src, dst):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self.lock:
            cut, self.open = self.open, []
        for end in cut:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self.listener.close()
        self.cut()


def test_follow_goes_on_after_a_dropped_connection_without_loss_or_repeat(
    server: Server,
) -> None:
    token = server.token("cli-drops")
    client = server.client(token)
    script = server.script(BASH_THEN_DONE, "cli-drops.json")
    body = {"task": "make a file", "source": {"path": str(server.repo("drops"))}, "model": script}
    sid = client.post("/sessions", json=body).json()["id"]
    wait_for(client, sid, lambda v: v["waiting_on"] == "approval")
    proxy = DroppingProxy(int(server.url.rsplit(":", 1)[1]))
    try:
        following = subprocess.Popen(
            [*KESTREL, "sessions", "follow", sid, "--json"],
            env={**_env(server, token), "KESTREL_SERVER_URL": f"http://127.0.0.1:{proxy.port}"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        before = read_until(following, '"approval_requested"')
        proxy.cut()
        (question,) = client.get(f"/sessions/{sid}/approvals").json()
        client.post(f"/sessions/{sid}/approvals/{question['call_id']}", json={"allow": True})
        rest, said = following.communicate(timeout=120)
    finally:
        proxy.close()
    assert following.returncode == 0, said
    assert "reconnecting after event" in said and "Traceback" not in said
    seqs = [json.loads(line)["seq"] for line in [*before, *rest.splitlines()]]
    assert seqs == [r["seq"] for r in client.get(f"/sessions/{sid}/events").json()]


def test_what_goes_wrong_is_one_clear_line(server: Server) -> None:
    owner = server.client(server.token("cli-owner"))
    script = server.script(QUIET, "cli-owner.json")
    body = {"task": "mine", "source": {"path": str(server.repo("owned-cli"))}, "model": script}
    sid = owner.post("/sessions", json=body).json()["id"]
    intruder = server.token("cli-intruder")
    empty = kestrel(server, intruder, "list")
    assert empty.returncode == 0 and empty.stdout.startswith("No sessions yet"), empty.stderr
    for args in (
        ["show", sid],
        ["follow", sid],
        ["diff", sid],
        ["cancel", sid],
        ["send", sid, "x"],
    ):
        refused = kestrel(server, intruder, *args)
        assert refused.returncode == 2, (args, refused.stderr)
        assert f"no session {sid}" in refused.stderr and "HTTP 404" in refused.stderr
        clean(refused)

    bad = kestrel(server, "ks_not-a-token", "list")
    assert bad.returncode == 2 and "ks_not-a-token" not in bad.stderr + bad.stdout
    assert "set KESTREL_API_TOKEN" in bad.stderr and "kestrel serve tokens create" in bad.stderr
    clean(bad)
    missing = kestrel(server, None, "list")
    assert missing.returncode == 2 and "set KESTREL_API_TOKEN" in missing.stderr

    with socket.socket() as probe:  # A port nothing listens on.
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    gone = kestrel(server, intruder, "list", url=f"http://127.0.0.1:{free}")
    assert gone.returncode == 1 and "cannot reach the server" in gone.stderr
    clean(gone)
    for url, says in (
        ("not a url", "is not a server's address"),
        ("http://kestrel.example.com", "--insecure"),
        ("https://user:pw@kestrel.example.com", "must not hold a user name"),
    ):
        wrong = kestrel(server, intruder, "list", url=url)
        assert wrong.returncode == 2 and says in wrong.stderr, wrong.stderr
        assert "pw" not in wrong.stderr
    needs = subprocess.run(
        [*KESTREL, "sessions", "follow", sid],
        env=_env(server, intruder),
        capture_output=True,
        text=True,
    )
    assert needs.returncode == 2
    assert "--server URL (or KESTREL_SERVER_URL) is required" in needs.stderr


def test_a_redirect_to_another_host_never_gets_the_token(server: Server) -> None:
    reached: list[str] = []

    class Elsewhere(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            reached.append(self.headers.get("Authorization", ""))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    other = http.server.HTTPServer(("127.0.0.1", 0), Elsewhere)
    target = f"http://localhost:{other.server_address[1]}"

    class Redirects(Elsewhere):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", target + self.path)
            self.end_headers()

    front = http.server.HTTPServer(("127.0.0.1", 0), Redirects)
    for each in (other, front):
        threading.Thread(target=each.serve_forever, daemon=True).start()
    try:
        done = kestrel(
            server, "ks_secret", "list", url=f"http://127.0.0.1:{front.server_address[1]}"
        )
    finally:
        for each in (other, front):
            each.shutdown()
    assert done.returncode == 2 and "another host" in done.stderr, done.stderr
    assert reached == [] and "ks_secret" not in done.stderr
