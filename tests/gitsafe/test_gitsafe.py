"""The hardened host-side git call, against real repositories laid out to attack it.

Every payload is a script that appends to a marker file; a test that lets git run it fails on
the marker, not only on the return value.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kestrel.app import has_uncommitted_work
from kestrel.context.inventory import list_files
from kestrel.gitsafe import (
    NotARepository,
    UnsafeRepository,
    find_repository,
    open_repository,
    run_git,
    safe_env,
)
from kestrel.gitsafe.config import refused_keys

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def plain(cwd: Path, *args: str) -> str:
    """git as a user would run it (only global and system config kept out of the test)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), **IDENTITY}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    done = subprocess.run(
        ["git", "-c", "protocol.file.allow=always", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    plain(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("a\n")
    plain(path, "add", "a.txt")
    plain(path, "commit", "-qm", "first")
    return path


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "PWNED"


@pytest.fixture
def payload(tmp_path: Path, marker: Path) -> Path:
    script = tmp_path / "payload.sh"
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\n')
    script.chmod(0o755)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for name in ("pre-commit", "post-commit", "post-checkout", "reference-transaction"):
        shutil.copy(script, hooks / name)
    return script


def arm(config_dir: Path, payload: Path) -> None:
    """Point fsmonitor and the hooks of the git directory `config_dir` at the payload."""
    config = str(config_dir / "config")
    plain(config_dir, "config", "-f", config, "core.fsmonitor", str(payload))
    plain(config_dir, "config", "-f", config, "core.hooksPath", str(payload.parent / "hooks"))


def test_the_environment_drops_inherited_git_variables() -> None:
    base = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "GIT_DIR": "/elsewhere",
        "GIT_EXTERNAL_DIFF": "/x",
        "GIT_SSH_COMMAND": "/x",
        "GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='/x'",
        "GIT_ASKPASS": "/x",
        "XDG_CONFIG_HOME": "/home/u/.config",
    }
    env = safe_env(base=base)
    assert not {"GIT_DIR", "GIT_EXTERNAL_DIFF", "GIT_SSH_COMMAND", "GIT_ASKPASS"} & set(env)
    assert "GIT_CONFIG_PARAMETERS" not in env and "XDG_CONFIG_HOME" not in env
    assert env["GIT_CONFIG_GLOBAL"] == os.devnull and env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    pairs = {
        env[f"GIT_CONFIG_KEY_{n}"]: env[f"GIT_CONFIG_VALUE_{n}"]
        for n in range(int(env["GIT_CONFIG_COUNT"]))
    }
    assert pairs["core.fsmonitor"] == "false" and pairs["core.hooksPath"] == "/dev/null"
    assert pairs["protocol.allow"] == "never" and "protocol.file.allow" not in pairs
    assert safe_env(base=base, user_config=True)["XDG_CONFIG_HOME"] == "/home/u/.config"
    assert "GIT_CONFIG_GLOBAL" not in safe_env(base=base, user_config=True)


def test_an_ordinary_repository_works_from_a_subfolder(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    (repo / "sub").mkdir()
    (repo / "sub" / "new.txt").write_text("n\n")
    done = run_git(repo / "sub", ["ls-files", "--others"])
    assert done.ok and done.text() == plain(repo / "sub", "ls-files", "--others") == "new.txt\n"
    assert has_uncommitted_work(repo)


def test_outside_a_work_tree_there_is_no_repository(tmp_path: Path) -> None:
    (tmp_path / "loose").mkdir()
    assert find_repository(tmp_path / "loose") is None or find_repository(
        tmp_path / "loose"
    ).work_tree != (tmp_path / "loose")
    with pytest.raises(NotARepository):
        run_git(Path("/"), ["status"])


def test_repository_hooks_and_fsmonitor_never_run(
    tmp_path: Path, payload: Path, marker: Path
) -> None:
    repo = make_repo(tmp_path / "r")
    arm(repo / ".git", payload)
    shutil.copy(payload, repo / ".git" / "hooks" / "pre-commit")
    (repo / "a.txt").write_text("changed\n")
    assert run_git(repo, ["status", "--porcelain"]).text() == " M a.txt\n"
    env_identity = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    assert run_git(repo, [*env_identity, "commit", "-qam", "x"]).ok
    assert not marker.exists()
    plain(repo, "status")  # the same repository does run it for a plain git
    assert marker.exists()


def test_a_git_file_pointing_outside_gits_layout_is_refused(
    tmp_path: Path, payload: Path, marker: Path
) -> None:
    repo = make_repo(tmp_path / "r")
    evil = tmp_path / "evil.git"
    shutil.copytree(repo / ".git", evil)
    arm(evil, payload)
    shutil.rmtree(repo / ".git")
    (repo / ".git").write_text(f"gitdir: {evil}\n")
    with pytest.raises(UnsafeRepository, match="neither a linked worktree"):
        run_git(repo, ["status"])
    assert has_uncommitted_work(repo)  # unknown counts as changed
    assert {e.path for e in list_files(repo)} >= {"a.txt"}  # listed by walking instead
    assert not marker.exists()


def test_a_git_file_pointing_into_the_work_tree_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    shutil.move(repo / ".git", repo / "hidden")
    (repo / ".git").write_text("gitdir: hidden\n")
    with pytest.raises(UnsafeRepository, match="inside the work tree"):
        open_repository(repo)


def test_a_commondir_in_a_main_git_dir_is_refused(tmp_path: Path, payload: Path) -> None:
    repo = make_repo(tmp_path / "r")
    other = tmp_path / "other.git"
    shutil.copytree(repo / ".git", other)
    arm(other, payload)
    (repo / ".git" / "commondir").write_text(f"{other}\n")
    with pytest.raises(UnsafeRepository, match="commondir"):
        run_git(repo, ["status"])


def test_a_linked_worktree_works_and_its_pointers_are_checked(tmp_path: Path) -> None:
    main = make_repo(tmp_path / "main")
    plain(main, "worktree", "add", "-q", "-b", "side", str(tmp_path / "wt"))
    wt = tmp_path / "wt"
    repo = open_repository(wt)
    assert repo.git_dir == main / ".git" / "worktrees" / "wt"
    assert repo.common_dir == main / ".git"
    assert run_git(wt, ["status", "--porcelain"]).ok
    # commondir rewritten to somewhere else
    other = tmp_path / "other.git"
    shutil.copytree(main / ".git", other)
    commondir = repo.git_dir / "commondir"
    commondir.write_text(f"{other}\n")
    with pytest.raises(UnsafeRepository, match="commondir"):
        run_git(wt, ["status"])
    commondir.write_text("../..\n")
    # the back-link must name this very .git file
    (repo.git_dir / "gitdir").write_text(f"{tmp_path / 'elsewhere' / '.git'}\n")
    with pytest.raises(UnsafeRepository, match="gitdir"):
        run_git(wt, ["status"])


def test_a_worktree_of_a_git_dir_made_up_inside_a_work_tree_is_refused(tmp_path: Path) -> None:
    main = make_repo(tmp_path / "main")
    fake = main / "fake"
    shutil.copytree(main / ".git", fake)
    (fake / "worktrees" / "wt").mkdir(parents=True)
    wt = main / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {fake / 'worktrees' / 'wt'}\n")
    (fake / "worktrees" / "wt" / "commondir").write_text("../..\n")
    (fake / "worktrees" / "wt" / "gitdir").write_text(f"{wt / '.git'}\n")
    with pytest.raises(UnsafeRepository, match="not a repository's own git directory"):
        open_repository(wt)


def test_submodules_work_and_must_live_in_their_superprojects_modules(
    tmp_path: Path, payload: Path, marker: Path
) -> None:
    upstream = make_repo(tmp_path / "up")
    sup = make_repo(tmp_path / "sup")
    plain(sup, "submodule", "add", "-q", str(upstream), "sub")
    plain(sup, "commit", "-qm", "add sub")
    arm(sup / ".git" / "modules" / "sub", payload)
    (sup / "sub" / "a.txt").write_text("dirty\n")
    assert open_repository(sup / "sub").git_dir == sup / ".git" / "modules" / "sub"
    assert run_git(sup / "sub", ["status", "--porcelain"]).text() == " M a.txt\n"
    # the superproject's status does not start git inside the submodule
    assert run_git(sup, ["status", "--porcelain"]).text() == ""
    assert not marker.exists()
    assert plain(sup, "status", "--porcelain") == " M sub\n" and marker.exists()
    marker.unlink()
    assert not marker.exists()
    # a copy that looks like a superproject's modules folder, but is not the enclosing one
    fake = tmp_path / "fake"
    shutil.copytree(sup / ".git", fake)
    (sup / "sub" / ".git").write_text(f"gitdir: {fake / 'modules' / 'sub'}\n")
    with pytest.raises(UnsafeRepository, match="superproject"):
        run_git(sup / "sub", ["status"])
    assert not marker.exists()


def test_alternates_inside_the_work_tree_are_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    store = make_repo(tmp_path / "store")
    alternates = repo / ".git" / "objects" / "info" / "alternates"
    alternates.write_text(f"{store / '.git' / 'objects'}\n")
    assert run_git(repo, ["status"]).ok  # another repository of the same user is fine
    (repo / "planted").mkdir()
    alternates.write_text(f"{repo / 'planted'}\n")
    with pytest.raises(UnsafeRepository, match="inside the work tree"):
        run_git(repo, ["status"])


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("include.path", "/tmp/x"),
        ("includeIf.gitdir:/.path", "/tmp/x"),
        ("filter.lfs.process", "x"),
        ("filter.evil.clean", "x"),
        ("diff.evil.textconv", "x"),
        ("diff.external", "x"),
        ("merge.evil.driver", "x"),
        ("core.sshCommand", "x"),
        ("uploadpack.packObjectsHook", "x"),
        ("remote.origin.uploadpack", "x"),
        ("credential.helper", "x"),
        ("gpg.program", "x"),
        ("submodule.sub.update", "!x"),
    ],
)
def test_a_repository_config_naming_a_program_is_refused(
    tmp_path: Path, key: str, value: str
) -> None:
    repo = make_repo(tmp_path / "r")
    plain(repo, "config", key, value)
    with pytest.raises(UnsafeRepository, match="would run a program"):
        run_git(repo, ["status"])


def test_config_keys_that_are_overridden_do_not_refuse(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    for key, value in (("core.fsmonitor", "true"), ("core.editor", "vim"), ("alias.st", "status")):
        plain(repo, "config", key, value)
    plain(repo, "config", "submodule.sub.update", "checkout")
    assert run_git(repo, ["status"]).ok


def test_refused_keys_reads_only_the_repositorys_own_scopes() -> None:
    listing = "global\0filter.lfs.process\ngit-lfs\0local\0diff.x.textconv\ncat\0"
    listing += "command\0core.fsmonitor\nfalse\0worktree\0include.path\n/x\0"
    assert refused_keys(listing) == ["diff.x.textconv", "include.path"]


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a folder's owner needs root")
def test_a_repository_of_another_user_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    os.chown(repo / ".git", 4321, 4321)
    with pytest.raises(UnsafeRepository, match="belongs to user 4321"):
        run_git(repo, ["status"])


def test_a_symlinked_git_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    shutil.move(repo / ".git", tmp_path / "real.git")
    (repo / ".git").symlink_to(tmp_path / "real.git")
    with pytest.raises(UnsafeRepository, match="symbolic link"):
        run_git(repo, ["status"])


def test_fetching_from_a_path_needs_the_file_protocol_asked_for(tmp_path: Path) -> None:
    source = make_repo(tmp_path / "src")
    dest = tmp_path / "dest"
    dest.mkdir()
    assert run_git(dest, ["init", "-q"], repository=False).ok
    head = plain(source, "rev-parse", "HEAD").strip()
    refused = run_git(dest, ["fetch", "-q", str(source), head])
    assert not refused.ok and "not allowed" in refused.said()
    assert run_git(dest, ["fetch", "-q", str(source), head], file_protocol=True).ok


def test_an_inherited_git_dir_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, payload: Path, marker: Path
) -> None:
    repo = make_repo(tmp_path / "r")
    evil = tmp_path / "evil.git"
    shutil.copytree(repo / ".git", evil)
    arm(evil, payload)
    monkeypatch.setenv("GIT_DIR", str(evil))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='{payload}'")
    assert run_git(repo, ["status"]).ok
    assert not marker.exists()


def test_a_timeout_ends_git_and_every_process_it_started(tmp_path: Path) -> None:
    from kestrel.gitsafe import GitUnavailable

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    marker = "31.4159"  # A sleep no other process runs: found by its argument.
    # An alias runs a program the way a transport helper would: a child git does not wait for.
    args = ["-c", f"alias.slow=!sleep {marker}", "slow"]
    with pytest.raises(GitUnavailable, match="took longer than"):
        run_git(tmp_path, args, timeout_s=1)
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    assert left.stdout.strip() == "", "a process git started outlived the timeout"
