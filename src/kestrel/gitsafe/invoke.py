"""The one way Kestrel runs git on the host: validated repository, neutral config, clean env."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kestrel.gitsafe.config import FILE_PROTOCOL, NEUTRAL_CONFIG, refused_keys
from kestrel.gitsafe.layout import Repository, UnsafeRepository, find_repository
from kestrel.protocol.errors import KestrelError

_KEPT_ENV = ("PATH", "HOME", "TMPDIR", "TZ")
_USER_ENV = ("XDG_CONFIG_HOME",)


class GitUnavailable(KestrelError):
    """git is not installed, or did not finish in time."""


class NotARepository(KestrelError):
    """A call that needs a repository ran where there is none."""


@dataclass(frozen=True, slots=True)
class GitRun:
    """What one git command printed and how it exited."""

    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        """Whether git exited 0."""
        return self.returncode == 0

    def text(self) -> str:
        """stdout decoded as UTF-8, undecodable bytes kept as surrogates."""
        return self.stdout.decode("utf-8", errors="surrogateescape")

    def said(self) -> str:
        """The last line git wrote to stderr (or stdout), for an error message."""
        lines = (self.stderr or self.stdout).decode("utf-8", errors="replace").strip()
        return lines.splitlines()[-1] if lines else f"exit status {self.returncode}"


def safe_env(
    *,
    repo: Repository | None = None,
    user_config: bool = False,
    file_protocol: bool = False,
    base: Mapping[str, str] | None = None,
    config: Sequence[tuple[str, str]] = (),
) -> dict[str, str]:
    """The environment of a host-side git call: no inherited GIT_*, neutral config on top.

    `user_config` keeps the user's own global file (for their excludes and identity); the
    system file is never read. With `repo` the git and work-tree directories are pinned, so
    git does no discovery of its own.
    """
    source = os.environ if base is None else base
    kept = _KEPT_ENV + (_USER_ENV if user_config else ())
    env = {key: source[key] for key in kept if key in source}
    env.setdefault("PATH", os.defpath)
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_PROTOCOL_FROM_USER="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_PAGER="cat",
        GIT_EDITOR="false",
        LC_ALL="C",
    )
    if not user_config:
        env["GIT_CONFIG_GLOBAL"] = os.devnull
    if repo is not None:
        env.update(GIT_DIR=str(repo.git_dir), GIT_WORK_TREE=str(repo.work_tree))
    pairs = (*NEUTRAL_CONFIG, *(FILE_PROTOCOL if file_protocol else ()), *config)
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for number, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{number}"] = key
        env[f"GIT_CONFIG_VALUE_{number}"] = value
    return env


def open_repository(start: Path) -> Repository:
    """The validated repository around `start`, its own configuration checked too.

    Raises `NotARepository` outside a work tree and `UnsafeRepository` when git's files there
    point elsewhere, belong to someone else, or configure a program to run.
    """
    repo = find_repository(start)
    if repo is None:
        raise NotARepository(f"{start} is not inside a git work tree")
    listing = _exec(
        ["config", "--no-includes", "--show-scope", "--list", "-z"],
        cwd=repo.work_tree,
        env=safe_env(repo=repo),
        stdin=None,
        timeout_s=30,
    )
    if not listing.ok:
        said = listing.said()
        raise UnsafeRepository(f"cannot read the configuration of {repo.work_tree}: {said}")
    refused = refused_keys(listing.text())
    if refused:
        names = ", ".join(sorted(set(refused)))
        raise UnsafeRepository(
            f"the git configuration of {repo.work_tree} sets {names}, which would run a program "
            "or read another file; Kestrel will not run git there"
        )
    return repo


def run_git(
    cwd: Path,
    args: Sequence[str],
    *,
    stdin: bytes | None = None,
    timeout_s: float = 120,
    user_config: bool = False,
    file_protocol: bool = False,
    repository: bool = True,
    config: Sequence[tuple[str, str]] = (),
    env: Mapping[str, str] | None = None,
) -> GitRun:
    """Run `git ARGS` in `cwd` with the hardened environment; a non-zero exit is returned.

    With `repository` (the default) the repository around `cwd` is validated first and pinned;
    without it (`init`, `merge-file` on loose files) git gets the same neutral environment and
    no repository. `config` adds settings after the neutral ones (passed in the environment,
    so a secret in one is not on a command line); `env` adds variables (`GIT_INDEX_FILE`).
    Raises `UnsafeRepository`, `NotARepository` or `GitUnavailable`.
    """
    repo = open_repository(cwd) if repository else None
    environment = safe_env(
        repo=repo, user_config=user_config, file_protocol=file_protocol, config=config
    )
    environment.update(env or {})
    if repo is None:
        # No looking for a repository above the folder, where a command may have made one.
        environment["GIT_CEILING_DIRECTORIES"] = str(Path(os.path.abspath(cwd)).parent)
    return _exec(list(args), cwd=cwd, env=environment, stdin=stdin, timeout_s=timeout_s)


def _exec(
    args: list[str], *, cwd: Path, env: dict[str, str], stdin: bytes | None, timeout_s: float
) -> GitRun:
    # In a process group of its own, so that a timeout (or Ctrl-C here) ends git's helpers too:
    # a transport or pack process left running would hold the output pipes open, and the
    # wait for them would outlast the timeout.
    try:
        proc = subprocess.Popen(
            ["git", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError as error:
        # The same error says the folder to run in is gone: only then is it named.
        if not cwd.is_dir():
            raise GitUnavailable(f"cannot run git: {cwd} does not exist") from error
        raise GitUnavailable("git is not installed") from error
    except OSError as error:
        raise GitUnavailable(f"cannot run git: {error.strerror}") from error
    try:
        out, err = proc.communicate(stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired as error:
        _kill_group(proc)
        raise GitUnavailable(f"git {args[0]} took longer than {timeout_s:g} s") from error
    except BaseException:
        _kill_group(proc)
        raise
    return GitRun(proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """End git and every process it started, and reap git."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()
    proc.communicate()
