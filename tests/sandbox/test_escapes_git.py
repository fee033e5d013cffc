"""Attacks on the host through git files a sandboxed command writes; every one must fail.

Each attack runs for real inside bubblewrap against a real superproject with a real submodule
(and, where it matters, a linked worktree). Its payload, run by git, would append to a marker
file outside the workspace. After the attack, Kestrel's own host-side git calls run (the dirty
check the app makes, the context inventory), then the user's own plain `git status` and
`git diff` as well, since the sandbox must hold even for git that Kestrel does not start. The
marker must not exist, the guarded files must be as they were, and `git status` inside the
sandbox must still work.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from kestrel.app import has_uncommitted_work
from kestrel.context.inventory import list_files
from kestrel.sandbox.base import ExecResult
from kestrel.sandbox.bwrap import BwrapExecutor, SandboxConfig
from kestrel.sandbox.gitrestore import BLOCKED_SUFFIX

IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def host_git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The user's own git, as they would type it: no Kestrel hardening at all."""
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), **IDENTITY}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    return subprocess.run(
        ["git", "-c", "protocol.file.allow=always", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@dataclass
class Repo:
    """A superproject `ws` with a submodule `sub` and a linked worktree `wt` inside it."""

    ws: Path
    marker: Path
    upstream: Path

    @property
    def payload(self) -> str:
        """Shell lines, run inside the sandbox, that make `evil/` hold a payload and hooks."""
        return f"""
mkdir -p evil/hooks
printf '#!/bin/sh\\necho "$0 $*" >> {self.marker}\\n' > evil/p.sh
chmod +x evil/p.sh
for h in pre-commit post-checkout post-index-change reference-transaction; do
  cp evil/p.sh evil/hooks/$h
done
evil_config() {{
  git config -f "$1" core.fsmonitor "$PWD/evil/p.sh"
  git config -f "$1" core.hooksPath "$PWD/evil/hooks"
}}
"""


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    if shutil.which("bwrap") is None or shutil.which("git") is None:
        if os.environ.get("CI"):
            pytest.fail("bubblewrap and git are needed, and CI must run the escape suite")
        pytest.skip("bubblewrap or git is not installed")
    upstream, ws = tmp_path / "upstream", tmp_path / "ws"
    for folder in (upstream, ws):
        folder.mkdir()
        assert host_git(folder, "init", "-q", "-b", "main").returncode == 0
        (folder / "README").write_text(f"{folder.name}\n")
        host_git(folder, "add", "README")
        assert host_git(folder, "commit", "-qm", "first").returncode == 0
    added = host_git(ws, "submodule", "add", "-q", str(upstream), "sub")
    assert added.returncode == 0, added.stderr
    assert host_git(ws, "commit", "-qm", "add sub").returncode == 0
    assert host_git(ws, "worktree", "add", "-q", "-b", "side", "wt").returncode == 0
    (ws / ".git" / "info" / "exclude").write_text("wt/\nevil/\n")
    return Repo(ws=ws, marker=tmp_path / "PWNED", upstream=upstream)


async def attack(repo: Repo, script: str, where: Path | None = None) -> ExecResult:
    """Run the attack in the sandbox; then check `git status` still works in a sandbox.

    A workspace that is a linked worktree or a submodule has its git directory outside, in the
    main repository, which the sandbox does not show; `git status` is then checked in a
    sandbox of the superproject, after the attack.
    """
    ws = where or repo.ws
    result = await sandbox(ws).run(repo.payload + script, cwd=ws, timeout_s=60)
    status = await sandbox(repo.ws).run(
        "git status --porcelain && echo STATUS-OK", cwd=repo.ws, timeout_s=60
    )
    assert "STATUS-OK" in status.output, status.output
    return result


def sandbox(ws: Path) -> BwrapExecutor:
    return BwrapExecutor(ws, config=SandboxConfig(), kill_grace_s=0.5, drain_grace_s=0.3)


def host_side_git_runs(repo: Repo, *folders: Path) -> None:
    """Kestrel's own git calls, then the user's plain git, in each folder; nothing may run."""
    for folder in folders:
        has_uncommitted_work(folder)
        list_files(folder)
        host_git(folder, "status")
        host_git(folder, "diff")
    assert not repo.marker.exists(), repo.marker.read_text()


def snapshot(*paths: Path) -> dict[Path, bytes | None]:
    return {p: p.read_bytes() if p.is_file() else None for p in paths}


async def test_a_submodule_git_file_cannot_be_pointed_at_a_planted_git_dir(repo: Repo) -> None:
    ws = repo.ws
    before = snapshot(ws / "sub" / ".git")
    result = await attack(
        repo,
        """
cp -r .git/modules/sub evil/gd && evil_config evil/gd/config
git config -f evil/gd/config core.worktree "$PWD/sub"
printf 'gitdir: ../evil/gd\\n' > sub/.git || echo BLOCKED
""",
    )
    assert "BLOCKED" in result.output
    assert snapshot(ws / "sub" / ".git") == before
    host_side_git_runs(repo, ws, ws / "sub")


async def test_renaming_a_submodule_folder_to_plant_a_git_file_is_undone(repo: Repo) -> None:
    ws = repo.ws
    before = snapshot(ws / "sub" / ".git")
    result = await attack(
        repo,
        """
cp -r .git/modules/sub evil/gd && evil_config evil/gd/config
git config -f evil/gd/config core.worktree "$PWD/sub"
mv sub sub-moved && mkdir sub && printf 'gitdir: ../evil/gd\\n' > sub/.git && echo SWAPPED
""",
    )
    assert "SWAPPED" in result.output
    assert "sub/.git" in result.output  # the note says what was put back
    assert snapshot(ws / "sub" / ".git") == before
    assert (ws / "sub" / f".git{BLOCKED_SUFFIX}").read_text() == "gitdir: ../evil/gd\n"
    host_side_git_runs(repo, ws, ws / "sub")


async def test_a_worktree_git_file_inside_the_workspace_is_read_only(repo: Repo) -> None:
    ws = repo.ws
    before = snapshot(ws / "wt" / ".git", ws / ".git" / "worktrees" / "wt" / "commondir")
    result = await attack(
        repo,
        """
git init -q --bare evil/common && evil_config evil/common/config
mkdir -p evil/common/worktrees/wt && echo ../.. > evil/common/worktrees/wt/commondir
echo "$PWD/wt/.git" > evil/common/worktrees/wt/gitdir
cp .git/worktrees/wt/HEAD evil/common/worktrees/wt/
printf "gitdir: $PWD/evil/common/worktrees/wt\\n" > wt/.git || echo BLOCKED-FILE
echo "$PWD/evil/common" > .git/worktrees/wt/commondir || echo BLOCKED-COMMONDIR
""",
    )
    assert "BLOCKED-FILE" in result.output and "BLOCKED-COMMONDIR" in result.output
    assert snapshot(ws / "wt" / ".git", ws / ".git" / "worktrees" / "wt" / "commondir") == before
    host_side_git_runs(repo, ws, ws / "wt")


async def test_a_linked_worktree_as_the_workspace_keeps_its_git_file(repo: Repo) -> None:
    wt = repo.ws / "wt"
    before = snapshot(wt / ".git")
    result = await attack(
        repo,
        """
git init -q evil/gd && evil_config evil/gd/.git/config
printf "gitdir: $PWD/evil/gd/.git\\n" > .git || echo BLOCKED
rm -f .git || echo BLOCKED-RM
""",
        where=wt,
    )
    assert "BLOCKED" in result.output and "BLOCKED-RM" in result.output
    assert snapshot(wt / ".git") == before
    host_side_git_runs(repo, wt)


async def test_gitmodules_cannot_be_rewritten_or_planted(repo: Repo) -> None:
    ws = repo.ws
    before = snapshot(ws / ".gitmodules")
    result = await attack(
        repo,
        """
git config -f .gitmodules submodule.sub.update "!$PWD/evil/p.sh" || echo BLOCKED
printf '[submodule "sub"]\\n\\tpath = evil\\n' > .gitmodules || echo BLOCKED-WRITE
""",
    )
    assert "BLOCKED" in result.output and "BLOCKED-WRITE" in result.output
    assert snapshot(ws / ".gitmodules") == before
    # The submodule's own checkout has no .gitmodules: one planted there is moved aside.
    result = await attack(
        repo,
        '[ -e .gitmodules ] || printf "[submodule \\"x\\"]\\n\\tpath = x\\n" > .gitmodules',
        where=ws / "sub",
    )
    assert not (ws / "sub" / ".gitmodules").exists()
    assert (ws / "sub" / f".gitmodules{BLOCKED_SUFFIX}").exists()
    host_side_git_runs(repo, ws, ws / "sub")


async def test_info_attributes_cannot_bring_in_a_filter_driver(repo: Repo) -> None:
    ws = repo.ws
    result = await attack(
        repo,
        """
printf '* filter=evil diff=evil\\n' > .git/info/attributes || echo BLOCKED-ATTR
printf '* filter=evil diff=evil\\n' > .gitattributes
git config filter.evil.clean "$PWD/evil/p.sh" || echo BLOCKED-CONFIG
git config diff.evil.textconv "$PWD/evil/p.sh" || echo BLOCKED-CONFIG
git config -f .git/config.worktree filter.evil.clean "$PWD/evil/p.sh"
git config -f .git/modules/sub/config filter.evil.process "$PWD/evil/p.sh" || echo BLOCKED-MOD
echo change >> README
""",
    )
    assert "BLOCKED-ATTR" in result.output and "BLOCKED-MOD" in result.output
    assert result.output.count("BLOCKED-CONFIG") == 2
    assert not (ws / ".git" / "info" / "attributes").exists()
    assert not (ws / ".git" / "config.worktree").exists()
    assert "evil" not in (ws / ".git" / "config").read_text()
    host_side_git_runs(repo, ws, ws / "sub")


async def test_a_planted_commondir_is_moved_aside(repo: Repo) -> None:
    ws = repo.ws
    result = await attack(
        repo,
        """
git init -q --bare evil/common && evil_config evil/common/config
cp -r .git/objects/. evil/common/objects/ && cp -r .git/refs/. evil/common/refs/
echo "$PWD/evil/common" > .git/commondir && echo PLANTED
echo "$PWD/evil/common" > .git/modules/sub/commondir && echo PLANTED-MOD
""",
    )
    assert "PLANTED" in result.output
    assert not (ws / ".git" / "commondir").exists()
    assert not (ws / ".git" / "modules" / "sub" / "commondir").exists()
    assert (ws / ".git" / f"commondir{BLOCKED_SUFFIX}").exists()
    host_side_git_runs(repo, ws, ws / "sub")


async def test_planted_alternates_are_moved_aside(repo: Repo) -> None:
    ws = repo.ws
    result = await attack(
        repo,
        """
git init -q --bare evil/store
echo "$PWD/evil/store/objects" > .git/objects/info/alternates && echo PLANTED
""",
    )
    assert "PLANTED" in result.output and ".git/objects/info/alternates" in result.output
    assert not (ws / ".git" / "objects" / "info" / "alternates").exists()
    host_side_git_runs(repo, ws)


async def test_a_submodule_git_dir_config_and_hooks_hold(repo: Repo) -> None:
    ws = repo.ws
    module = ws / ".git" / "modules" / "sub"
    before = snapshot(module / "config")
    result = await attack(
        repo,
        """
evil_config .git/modules/sub/config || echo BLOCKED-CONFIG
cp evil/p.sh .git/modules/sub/hooks/post-checkout || echo BLOCKED-HOOK
mv .git/modules/sub .git/modules/sub-old && cp -r .git/modules/sub-old .git/modules/sub \
  && evil_config .git/modules/sub/config && echo SWAPPED
""",
    )
    assert "BLOCKED-CONFIG" in result.output and "BLOCKED-HOOK" in result.output
    assert "SWAPPED" in result.output
    assert snapshot(module / "config") == before
    assert not (module / "hooks" / "post-checkout").exists()
    host_side_git_runs(repo, ws, ws / "sub")


async def test_a_new_embedded_repository_cannot_bring_its_own_config(repo: Repo) -> None:
    ws = repo.ws
    result = await attack(
        repo,
        """
git init -q plant && (cd plant && git -c user.name=a -c user.email=a@b commit -q \
  --allow-empty -m x) && evil_config plant/.git/config && echo change > plant/file
git add plant && echo ADDED
""",
    )
    assert "ADDED" in result.output
    assert not (ws / "plant" / ".git" / "config").exists()
    assert (ws / "plant" / ".git" / f"config{BLOCKED_SUFFIX}").exists()
    host_side_git_runs(repo, ws)


async def test_a_planted_commondir_cannot_hide_a_new_gitlink(repo: Repo) -> None:
    ws = repo.ws
    result = await attack(
        repo,
        """
git init -q plant && (cd plant && git -c user.name=a -c user.email=a@b commit -q \
  --allow-empty -m x) && evil_config plant/.git/config && echo change > plant/file
git add plant && git init -q --bare evil/common && evil_config evil/common/config
echo "$PWD/evil/common" > .git/commondir && echo PLANTED
""",
    )
    assert "PLANTED" in result.output
    assert not (ws / ".git" / "commondir").exists()
    assert not (ws / "plant" / ".git" / "config").exists()
    host_side_git_runs(repo, ws)


async def test_a_cancelled_command_is_checked_too(repo: Repo) -> None:
    ws = repo.ws
    planted = ws / ".git" / "commondir"
    task = asyncio.ensure_future(
        sandbox(ws).run(f"echo {ws}/evil > .git/commondir; sleep 60", cwd=ws, timeout_s=120)
    )
    for _ in range(400):
        if planted.exists() or task.done():
            break
        await asyncio.sleep(0.05)
    assert planted.exists()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert not planted.exists()
    assert (ws / ".git" / f"commondir{BLOCKED_SUFFIX}").exists()
