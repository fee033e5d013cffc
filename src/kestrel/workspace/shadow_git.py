"""Run git against a shadow repository with an environment the user's configuration cannot reach."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kestrel.gitsafe.config import NEUTRAL_CONFIG
from kestrel.protocol.errors import KestrelError
from kestrel.protocol.oserrors import os_error_text

AUTHOR_NAME = "Kestrel checkpoints"
AUTHOR_EMAIL = "checkpoints@kestrel.invalid"

# Highest-precedence configuration, passed through the environment so that neither the user's
# global or system files nor anything left in the shadow repository's own config can override it.
_FIXED_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.autocrlf", "false"),
    ("core.fileMode", "true"),
    ("core.symlinks", "true"),
    ("core.quotePath", "false"),
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "true"),
    ("core.attributesFile", "/dev/null"),
    ("commit.gpgSign", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("advice.addEmbeddedRepo", "false"),
    ("diff.external", ""),
    ("user.name", AUTHOR_NAME),
    ("user.email", AUTHOR_EMAIL),
)

# Checkpoints must hold the exact bytes on disk, so end-of-line conversion, clean/smudge filters
# and encodings named by the project's own .gitattributes are switched off; this file outranks them.
SHADOW_ATTRIBUTES = "* -text -crlf -filter -ident -working-tree-encoding\n"


class CheckpointError(KestrelError):
    """Recording or restoring a checkpoint failed; the message says why."""


class UnknownCheckpoint(CheckpointError):
    """No checkpoint of this session has the given id (or the id prefix is ambiguous)."""


class GitFailed(CheckpointError):
    """A git command of the shadow repository exited non-zero; the message carries its stderr."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(f"git {' '.join(args)} exited {returncode}: {stderr.strip()}")
        self.git_args = tuple(args)
        self.returncode = returncode
        self.stderr = stderr


@dataclass(frozen=True, slots=True)
class GitResult:
    """What one git command printed and how it exited."""

    returncode: int
    stdout: bytes
    stderr: str


def shadow_env(
    *,
    git_dir: Path,
    worktree: Path,
    index_file: Path,
    excludes_file: Path | None,
    base: Mapping[str, str],
) -> dict[str, str]:
    """The environment for every shadow git call: explicit paths, fixed identity, no user config."""
    env = {key: value for key, value in base.items() if key in ("PATH", "HOME", "TMPDIR")}
    fixed = {key for key, _ in _FIXED_CONFIG}
    neutral = tuple(pair for pair in NEUTRAL_CONFIG if pair[0] not in fixed)
    excludes = ("core.excludesFile", str(excludes_file or "/dev/null"))
    config = (*neutral, *_FIXED_CONFIG, excludes)
    env.update(
        GIT_DIR=str(git_dir),
        GIT_WORK_TREE=str(worktree),
        GIT_INDEX_FILE=str(index_file),
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME=AUTHOR_NAME,
        GIT_AUTHOR_EMAIL=AUTHOR_EMAIL,
        GIT_COMMITTER_NAME=AUTHOR_NAME,
        GIT_COMMITTER_EMAIL=AUTHOR_EMAIL,
        GIT_TERMINAL_PROMPT="0",
        GIT_EDITOR="false",
        GIT_PAGER="cat",
        LC_ALL="C",
        GIT_CONFIG_COUNT=str(len(config)),
    )
    for number, (key, value) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{number}"] = key
        env[f"GIT_CONFIG_VALUE_{number}"] = value
    return env


class ShadowGit:
    """Runs git commands in the worktree with the shadow repository's fixed environment."""

    def __init__(self, git: str, worktree: Path, env: Mapping[str, str]) -> None:
        self._git = git
        self._worktree = worktree
        self._env = dict(env)

    def run(
        self,
        *args: str,
        stdin: bytes | None = None,
        check: bool = True,
        extra_env: Mapping[str, str] | None = None,
    ) -> GitResult:
        """Run `git ARGS`; raise `GitFailed` on a non-zero exit unless `check` is false."""
        env = self._env if extra_env is None else {**self._env, **extra_env}
        try:
            done = subprocess.run(
                [self._git, *args],
                cwd=self._worktree,
                env=env,
                input=stdin,
                capture_output=True,
                check=False,
                # Its own session: a Ctrl-C at the terminal goes to the whole foreground group,
                # and a checkpoint's git killed by it turned a cancel into an error.
                start_new_session=True,
            )
        except OSError as error:
            raise CheckpointError(f"cannot run {self._git}: {os_error_text(error)}") from error
        stderr = done.stderr.decode("utf-8", errors="replace")
        if check and done.returncode != 0:
            raise GitFailed(args, done.returncode, stderr)
        return GitResult(done.returncode, done.stdout, stderr)

    def text(self, *args: str, stdin: bytes | None = None) -> str:
        """Run `git ARGS` and return its stdout as one stripped line of text."""
        return self.run(*args, stdin=stdin).stdout.decode("utf-8", errors="replace").strip()


def init_shadow(git: str, git_dir: Path, base: Mapping[str, str]) -> None:
    """Create the bare shadow repository at `git_dir` unless it exists (no hooks, no templates)."""
    if (git_dir / "HEAD").is_file():
        return
    git_dir.parent.mkdir(parents=True, exist_ok=True)
    env = {key: value for key, value in base.items() if key in ("PATH", "HOME")}
    env.update(GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1", LC_ALL="C")
    args = ["init", "--quiet", "--bare", "--template=", str(git_dir)]
    try:
        done = subprocess.run(
            [git, *args], env=env, capture_output=True, check=False, start_new_session=True
        )
    except OSError as error:
        raise CheckpointError(f"cannot run {git}: {os_error_text(error)}") from error
    if done.returncode != 0:
        raise GitFailed(args, done.returncode, done.stderr.decode("utf-8", errors="replace"))
    (git_dir / "info").mkdir(exist_ok=True)
    (git_dir / "info" / "attributes").write_text(SHADOW_ATTRIBUTES, encoding="utf-8")
    (git_dir / "info" / "exclude").touch()


def exclude_pattern(relative_dir: str) -> str:
    """A gitignore line that matches exactly the directory `relative_dir`, specials escaped."""
    escaped = "".join("\\" + char if char in "\\*?[]!# " else char for char in relative_dir)
    return "/" + escaped.rstrip("/") + "/"
