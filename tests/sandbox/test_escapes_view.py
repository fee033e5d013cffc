"""Attacks on what the sandbox shows of the host, each against a real target; all must fail.

The sandbox's filesystem is an allow-list: no service sockets (PostgreSQL, MariaDB, one this test
opens), no /run, /var/lib, /srv, /mnt, /media, /opt or homes, no files only root may read, no
Kestrel data, no way back to the host through /proc. Each attack prints a marker first, so a
sandbox that fails to start fails the test; every target is first shown to work from the host,
so "unreachable inside" means something. Ordinary commands must still work.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kestrel.sandbox.base import ExecResult
from kestrel.sandbox.bwrap import BwrapExecutor, SandboxConfig
from kestrel.sandbox.view import ViewOptions

SECRET = "kestrel-view-secret-41c7e2"
STARTED = "__sandbox_started__"
EPERM = "errno 1\n"
PG_SOCKETS = ("/run/postgresql/.s.PGSQL.*", "/var/run/postgresql/.s.PGSQL.*", "/tmp/.s.PGSQL.*")
MARIADB_SOCKET = "/run/mysqld/mysqld.sock"


def sandbox_required() -> None:
    """Skip without bubblewrap on a workstation; in CI the suite must fail instead."""
    if shutil.which("bwrap") is None:
        if os.environ.get("CI"):
            pytest.fail("bubblewrap is not installed, and CI must run the escape suite")
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)")


def postgres_socket() -> str:
    """The running PostgreSQL server's socket; CI must have one, elsewhere skip without."""
    found = sorted(p for pattern in PG_SOCKETS for p in glob.glob(pattern))
    if not found:
        if os.environ.get("CI"):
            pytest.fail("no PostgreSQL socket: CI starts the server for this test")
        pytest.skip("PostgreSQL is not running here")
    return found[0]


def host_connects(path: str) -> None:
    """Prove `path` is a live socket from the host, so refusing it inside means something."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(path)


@dataclass
class Scene:
    """A workspace, a home with secrets, Kestrel's data, files only root reads, a listener."""

    root: Path
    ws: Path
    home: Path
    outside: Path
    data: Path
    planted: list[Path]
    unix_path: str
    unix: socket.socket
    abstract: socket.socket
    abstract_name: str

    def vars(self) -> dict[str, object]:
        return {
            "ws": self.ws,
            "home": self.home,
            "outside": self.outside,
            "data": self.data,
            "etc_file": self.planted[0],
            "var_file": self.planted[1],
            "unix_path": self.unix_path,
            "abstract": self.abstract_name,
            "pid": os.getpid(),
        }


def _root_only(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SECRET)
    path.chmod(0o600)
    return path


ETC_PLANTS = Path("/etc/kestrel-escape-test")
"""Root-only files planted in /etc stay there: a sandbox starting in another test process
mounts over each root-only file of /etc it found, and fails to start when one vanishes first."""


def etc_plant(name: str) -> Path:
    """A root-only file in /etc, made once and left (see ETC_PLANTS)."""
    path = ETC_PLANTS / name
    if not path.exists():
        ETC_PLANTS.mkdir(mode=0o755, exist_ok=True)
        _root_only(path)
    return path


@pytest.fixture
def scene(monkeypatch: pytest.MonkeyPatch) -> Iterator[Scene]:
    sandbox_required()
    root = Path(tempfile.mkdtemp(prefix="kestrel-view-", dir="/var/tmp"))
    ws, home, outside, data = (root / n for n in ("ws", "home", "outside", "data"))
    for folder in (ws, home, outside, data / "sessions" / "other"):
        folder.mkdir(parents=True)
    for name in (".ssh/id_ed25519", "notes.txt", "server.pem", ".aws/credentials"):
        _root_only(home / name)
    _root_only(data / "sessions.db")
    _root_only(data / "sessions" / "other" / "transcript.jsonl")
    _root_only(outside / "key.pem")
    tag = f"kestrel-view-{os.getpid()}-{root.name}"
    planted = [etc_plant("root-only.txt"), _root_only(Path("/var/lib") / tag / "secret")]
    planted.append(_root_only(outside / "root-only.txt"))
    unix_path = f"/run/{tag}.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(unix_path)
    unix.listen(4)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + tag)
    abstract.listen(4)
    for sock in (unix, abstract):
        sock.setblocking(False)
    monkeypatch.setenv("HOME", str(home))
    yield Scene(root, ws, home, outside, data, planted, unix_path, unix, abstract, tag)
    for sock in (unix, abstract):
        sock.close()
    Path(unix_path).unlink(missing_ok=True)
    shutil.rmtree(planted[1].parent, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)


def executor(scene: Scene, view: ViewOptions | None = None) -> BwrapExecutor:
    config = SandboxConfig(masked_paths=(scene.data,), view=view or ViewOptions())
    return BwrapExecutor(scene.ws, config=config, kill_grace_s=0.5, drain_grace_s=0.3)


async def run_in(scene: Scene, command: str, view: ViewOptions | None = None) -> ExecResult:
    result = await executor(scene, view).run(
        f"echo {STARTED}; {command}", cwd=scene.ws, timeout_s=30
    )
    assert STARTED in result.output, f"the sandbox did not start: {result.output}"
    return result


Check = Callable[[ExecResult, Scene], None]


def py(body: str) -> str:
    """A Python snippet as a shell command (a here-document, so quoting stays simple)."""
    return f"python3 - <<'EOF'\n{body}\nEOF"


def connect_unix(address: str) -> str:
    return py(
        "import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ns.settimeout(2)\n"
        f"try:\n    s.connect({address}); print('connected')\n"
        "except OSError as e:\n    print('blocked', e)"
    )


def blocked(result: ExecResult, scene: Scene) -> None:
    assert "blocked" in result.output and "connected" not in result.output, result.output


def fails(result: ExecResult, scene: Scene) -> None:
    assert result.exit_code != 0, result.output


def empty_or_absent(result: ExecResult, scene: Scene) -> None:
    """`ls -A` printed nothing but the marker (an empty folder) or said there is none."""
    listed = result.output.split(STARTED, 1)[1].strip()
    assert listed == "" or "No such file" in listed, result.output


def says(*texts: str) -> Check:
    def check(result: ExecResult, scene: Scene) -> None:
        for text in texts:
            assert text in result.output, result.output

    return check


def quiet(attr: str) -> Check:
    def check(result: ExecResult, scene: Scene) -> None:
        with pytest.raises(BlockingIOError):
            getattr(scene, attr).accept()

    return check


PG_COPY = (
    "psql -h {pgdir} -U postgres -c \"COPY (SELECT 1) TO PROGRAM 'touch {outside}/pwned'\" 2>&1;"
    " test -e {outside}/pwned && echo PWNED"
)

FIND_SOCKETS = "find / -path /proc -prune -o -type s -print 2>/dev/null"
VSOCK = py(
    "import socket\ntry:\n    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); print('made')\n"
    "except OSError as e:\n    print('errno', e.errno)"
)

ATTACKS: list[tuple[str, str, Check]] = [
    ("postgres socket", connect_unix("'{pg}'"), blocked),
    ("postgres copy from program", PG_COPY, lambda r, s: _no_file(r, s.outside / "pwned")),
    ("postgres socket via /proc/1/root", connect_unix("'/proc/1/root{pg}'"), blocked),
    ("postgres socket via /var/run", connect_unix("'/var/run/postgresql/.s.PGSQL.5432'"), blocked),
    ("mariadb socket", connect_unix(f"'{MARIADB_SOCKET}'"), blocked),
    ("socket planted under /run", connect_unix("'{unix_path}'"), quiet("unix")),
    ("abstract socket to the host", connect_unix("'\\0{abstract}'"), blocked),
    ("any socket by path", FIND_SOCKETS, empty_or_absent),
    ("list /run", "ls -A /run 2>&1", empty_or_absent),
    ("list /var/lib", "ls -A /var/lib 2>&1", empty_or_absent),
    ("list /srv", "ls -A /srv 2>&1", empty_or_absent),
    ("list /mnt", "ls -A /mnt 2>&1", empty_or_absent),
    ("list /media", "ls -A /media 2>&1", empty_or_absent),
    ("list /opt", "ls -A /opt 2>&1", empty_or_absent),
    ("list /home", "ls -A /home 2>&1", empty_or_absent),
    ("root-only file in /etc", "cat {etc_file}", fails),
    ("root-only file in /var/lib", "cat {var_file}", fails),
    ("root-only file outside", "cat {outside}/root-only.txt", fails),
    ("private keys of /etc/ssl", "ls -A /etc/ssl/private 2>&1", empty_or_absent),
    ("/proc/1/root", "cat /proc/1/root{var_file} /proc/1/root{outside}/root-only.txt", fails),
    ("/proc of a host pid", "cat /proc/{pid}/root{outside}/root-only.txt; ls /proc/{pid}/cwd",
     fails),
    ("/proc/self/root", "cat /proc/self/root{etc_file} /proc/self/root/run/mysqld/mysqld.pid",
     fails),
    ("host pids", "ls /proc | grep -c '^[0-9]'", lambda r, s: _few(r)),
    ("data dir by path", "cat {data}/sessions.db", fails),
    ("data dir by symlink", "ln -s {data} d && cat d/sessions.db", fails),
    ("other session by symlink", "ln -s {data}/sessions/other o && cat o/transcript.jsonl", fails),
    ("ssh key", "cat ~/.ssh/id_ed25519 {home}/.ssh/id_ed25519", fails),
    ("aws credentials", "cat ~/.aws/credentials", fails),
    ("pem in home", "cat ~/server.pem", fails),
    ("pem outside", "cat {outside}/key.pem", fails),
    ("vsock", VSOCK, says(EPERM)),
    ("cgroup tree", "ls /sys/fs/cgroup 2>&1", empty_or_absent),
]  # fmt: skip


def _no_file(result: ExecResult, path: Path) -> None:
    assert not path.exists() and "PWNED" not in result.output, result.output


def _few(result: ExecResult) -> None:
    assert int(result.output.split()[-1]) < 10, result.output


@pytest.mark.parametrize(("name", "command", "check"), ATTACKS, ids=[a[0] for a in ATTACKS])
async def test_attack_is_blocked(name: str, command: str, check: Check, scene: Scene) -> None:
    values = scene.vars()
    if "{pg" in command:
        pg = postgres_socket()
        host_connects(pg)
        values |= {"pg": pg, "pgdir": os.path.dirname(pg)}
    if MARIADB_SOCKET in command:
        if not os.path.exists(MARIADB_SOCKET):
            pytest.skip("MariaDB is not running here")
        host_connects(MARIADB_SOCKET)
    if name == "socket planted under /run":
        host_connects(scene.unix_path)
        scene.unix.accept()[0].close()
    result = await run_in(scene, command.format(**values))
    assert SECRET not in result.output
    check(result, scene)


def test_there_are_at_least_twenty_attacks() -> None:
    assert len(ATTACKS) >= 20 and len({a[0] for a in ATTACKS}) == len(ATTACKS)


async def test_a_root_only_file_added_to_etc_later_is_masked_too(scene: Scene) -> None:
    for old in ETC_PLANTS.glob("late-*"):  # left by earlier runs, long done
        if time.time() - old.stat().st_mtime > 3600:
            old.unlink()
    await run_in(scene, "true")  # the scan of /etc is now cached
    late = etc_plant(f"late-{scene.abstract_name}")
    result = await run_in(scene, f"cat {late}")
    assert result.exit_code != 0 and SECRET not in result.output


POSITIVE = [
    ("git", "git init -q r && cd r && echo a > a && git add a && "
     "git -c user.name=k -c user.email=k@e commit -qm m && git log --oneline | wc -l", "1"),
    ("python", "python3 -c 'import ssl, json, sqlite3, venv; print(\"py\", 2 + 2)'", "py 4"),
    ("pip list", "python3 -m pip list 2>/dev/null | grep -ci '^pip '", "1"),
    ("bash builtins", "cd /tmp && printf '%s\\n' x | { read v; echo \"got $v $PWD\"; }",
     "got x /tmp"),
    ("private temp dirs", "echo t > /tmp/t && echo v > /var/tmp/v && cat /tmp/t /var/tmp/v",
     "t\nv"),
    ("make", "printf 'all:\\n\\t@echo made\\n' > Makefile && make", "made"),
    ("cpu count", "nproc", ""),
    ("users and groups", "getent passwd root | cut -d: -f1", "root"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "command", "expected"), POSITIVE, ids=[p[0] for p in POSITIVE])
async def test_ordinary_commands_still_work(
    name: str, command: str, expected: str, scene: Scene
) -> None:
    result = await run_in(scene, command)
    assert result.exit_code == 0 and expected in result.output, result.output


@pytest.mark.parametrize("tool", ["rg", "cc"])
async def test_installed_tools_still_run(tool: str, scene: Scene) -> None:
    if shutil.which(tool) is None:
        if tool == "rg" and os.environ.get("CI"):
            pytest.fail("CI installs ripgrep")
        pytest.skip(f"{tool} is not installed")
    (scene.ws / "m.c").write_text('#include <stdio.h>\nint main(void){puts("hi from c");}\n')
    command = "rg -n 'hi from' m.c" if tool == "rg" else "cc m.c -o m && ./m"
    result = await run_in(scene, command)
    assert result.exit_code == 0 and "hi from c" in result.output, result.output


async def test_settings_paths_appear_read_only_or_writable(scene: Scene) -> None:
    shared, cache = scene.root / "shared", scene.root / "cache"
    shared.mkdir()
    cache.mkdir()
    (shared / "lib.txt").write_text("shared lib\n")
    view = ViewOptions(read_only=(shared,), writable=(cache,))
    result = await run_in(
        scene,
        f"cat {shared}/lib.txt; touch {shared}/x || echo ro-refused; echo c > {cache}/c",
        view,
    )
    assert "shared lib" in result.output and "ro-refused" in result.output, result.output
    assert not (shared / "x").exists() and (cache / "c").read_text() == "c\n"


async def test_a_settings_path_switched_to_run_by_a_symlink_is_not_shown(scene: Scene) -> None:
    (scene.root / "sdk").mkdir()
    link = scene.ws / "sdk-link"  # in the workspace: a command can retarget it
    link.symlink_to(scene.root / "sdk")
    view = ViewOptions(read_only=(link,))
    await run_in(scene, f"rm {link} && ln -s /run {link}", view)
    assert os.path.realpath(link) == "/run"
    result = await run_in(scene, "ls -A /run 2>&1", view)
    empty_or_absent(result, scene)
