"""Git alternates in the sandbox: object stores a shared clone borrows, bound read-only, and
the places they may never point at. Real bubblewrap, real git."""

from __future__ import annotations

import itertools
import os
import subprocess
from pathlib import Path

import pytest

from kestrel.sandbox.alternates import MAX_DEPTH, alternate_stores, refusal
from kestrel.sandbox.base import ExecResult
from kestrel.sandbox.bwrap import BwrapExecutor, SandboxConfig, mount_args
from kestrel.sandbox.usability import SandboxState


def session(ws: Path, state: Path | None) -> BwrapExecutor:
    config = SandboxConfig(state=SandboxState(state) if state else None)
    return BwrapExecutor(ws, config=config, kill_grace_s=0.5, drain_grace_s=0.3)


async def run(executor: BwrapExecutor, command: str) -> ExecResult:
    return await executor.run(command, cwd=executor.workspace, timeout_s=60)


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    done = subprocess.run(["git", *ident, *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _origin(path: Path, message: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text(message)
    _git(path, "add", "a.txt")
    _git(path, "commit", "-q", "-m", message)
    return path


@pytest.mark.parametrize("with_session", [True, False])
async def test_a_shared_clone_of_a_repository_under_tmp_reads_its_history(
    ws: Path, tmp_path: Path, with_session: bool
) -> None:
    first = _origin(tmp_path / "first", "first commit")
    middle = tmp_path / "middle"
    _git(tmp_path, "clone", "-q", "--shared", str(first), str(middle))
    (middle / "b.txt").write_text("b")
    _git(middle, "add", "b.txt")
    _git(middle, "commit", "-q", "-m", "second commit")
    ws.rmdir()
    _git(tmp_path, "clone", "-q", "--shared", str(middle), str(ws))
    assert (ws / ".git" / "objects" / "info" / "alternates").read_text().strip()

    sandbox = session(ws, tmp_path / "state" if with_session else None)
    result = await run(sandbox, "git log --format=%s && git status --short && echo clean")
    assert result.exit_code == 0, result.output
    assert result.output == "second commit\nfirst commit\nclean\n"
    # Read-only: the borrowed store cannot be changed from inside.
    store = first / ".git" / "objects"
    wrote = await run(sandbox, f"touch {store}/pack/x")
    assert wrote.exit_code != 0 and not (store / "pack" / "x").exists()


async def test_alternates_pointing_at_secrets_are_not_bound(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    secret = home / ".ssh"
    (secret / "pack").mkdir(parents=True)
    (secret / "id_ed25519").write_text("PRIVATE KEY")
    monkeypatch.setenv("HOME", str(home))
    data = tmp_path / "data"
    (data / "pack").mkdir(parents=True)
    (data / "session.log").write_text("LOG")
    _origin(ws, "x")
    alternates = ws / ".git" / "objects" / "info" / "alternates"
    alternates.write_text(f"{secret}\n{data}\n/\n/etc\n{home}\n")

    args = mount_args(ws, (data,))
    bound = {args[i + 1] for i, arg in enumerate(args) if arg in ("--bind", "--ro-bind")}
    assert not bound & {str(secret), str(data), str(home)}
    assert "/etc" not in args[args.index(str(ws)) :]
    sandbox = BwrapExecutor(ws, config=SandboxConfig(masked_paths=(data,)))
    result = await run(sandbox, f"cat {secret}/id_ed25519 {data}/session.log; git log --format=%s")
    assert "PRIVATE KEY" not in result.output and "LOG" not in result.output
    assert "x\n" in result.output


# --- which alternates are bound (pure checks on real folders) ------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home" / "ana"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


def _store(path: Path) -> Path:
    (path / "pack").mkdir(parents=True, exist_ok=True)
    return path


@pytest.mark.parametrize(
    "place",
    ["/", "/etc", "/etc/ssl", "/proc/self", "/sys", "/dev", "/run", "/var/run", "/root", "/home"],
)
def test_system_places_and_home_roots_are_refused(place: str) -> None:
    assert refusal(Path(place)) is not None


@pytest.mark.parametrize(
    "inside", [".ssh", ".aws/objects", ".config/gh", ".local/share/kestrel", ".gnupg", ".docker"]
)
def test_a_homes_hidden_folders_and_the_home_itself_are_refused(home: Path, inside: str) -> None:
    assert refusal(_store(home / inside)) is not None
    assert refusal(_store(home)) is not None
    assert refusal(home.parent) is not None


def test_kestrels_data_and_what_holds_it_are_refused(tmp_path: Path, home: Path) -> None:
    data = tmp_path / "data"
    assert refusal(_store(data / "overlays" / "s1"), [data]) is not None
    assert refusal(_store(tmp_path / "up"), [tmp_path / "up" / "data"]) is not None


def test_an_object_store_in_a_project_is_allowed_and_a_plain_folder_is_not(
    tmp_path: Path, home: Path
) -> None:
    assert refusal(_store(home / "code" / "proj" / ".git" / "objects")) is None
    assert refusal(_store(tmp_path / "origin.git" / "objects")) is None
    (tmp_path / "notes").mkdir()
    assert refusal(tmp_path / "notes") == "not a git object directory"


def test_alternates_files_are_read_like_git_and_bounded(tmp_path: Path, home: Path) -> None:
    ws = tmp_path / "ws"
    chain = [_store(tmp_path / f"s{i}") for i in range(MAX_DEPTH + 2)]
    info = ws / ".git" / "objects" / "info"
    info.mkdir(parents=True)
    (ws / ".git" / "objects" / "pack").mkdir()
    lines = ["# a comment", "", '"/quoted/path"', "../../../missing", f"../../../{chain[0].name}"]
    (info / "alternates").write_text("\n".join(lines) + "\n")
    for here, there in itertools.pairwise(chain):
        (here / "info").mkdir()
        (here / "info" / "alternates").write_text(f"{there}\n{here}\n")  # a loop back too
    assert alternate_stores(ws) == chain[:MAX_DEPTH]
    (info / "alternates").write_text(f"{ws / '.git' / 'objects'}\n{ws}\n")
    assert alternate_stores(ws) == []
