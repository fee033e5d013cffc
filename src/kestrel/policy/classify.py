"""Irreversible or dangerous actions in a parsed shell command or an edit, each with a sentence
the person can act on. Pure: the only outside question is `dirty()`, asked at most once."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kestrel.policy.shell import (
    ShellParse,
    SimpleCommand,
    git_key_runs_code,
    is_interpreter,
    reads_program_from_stdin,
)

__all__ = ["Danger", "classify_paths", "classify_shell"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Danger:
    """One dangerous action: the simple command (or edited path) and why it is dangerous."""

    command: str
    reason: str


def classify_shell(
    parsed: ShellParse, *, root: Path, cwd: Path, dirty: Callable[[], bool]
) -> list[Danger]:
    """The irreversible or dangerous actions among the commands of `parsed`, in source order."""
    scan = _Scan(parsed.commands, PurePosixPath(root), PurePosixPath(cwd), dirty)
    found: dict[tuple[str, str], Danger] = {}
    for index, command in enumerate(parsed.commands):
        for text, reason in _dangers(command, index, scan):
            found.setdefault((text, reason), Danger(command=text, reason=reason))
        scan.follow(command)
    return list(found.values())


def classify_paths(paths: Iterable[str], *, root: Path) -> list[Danger]:
    """Edit targets that are CI definitions, git hooks or config, or anything inside `.git/`."""
    base = PurePosixPath(root)
    dangers = []
    for raw in paths:
        path = _normal(raw if raw.startswith("/") else f"{base}/{raw}")
        if not path.is_relative_to(base):
            continue
        rel = path.relative_to(base).as_posix()
        what = _protected(rel)
        if what is None and (rel == ".git" or rel.startswith(".git/")):
            what = "part of git's own data, which a direct edit can corrupt"
        if what is not None:
            dangers.append(Danger(command=raw, reason=f"it edits {rel}, {what}"))
    return dangers


class _Scan:
    """What the scan of one command line knows: the workspace, the current directory as `cd`
    moves it (None once it is not known), and whether the work tree is dirty (asked once)."""

    def __init__(
        self,
        commands: Sequence[SimpleCommand],
        root: PurePosixPath,
        cwd: PurePosixPath,
        dirty: Callable[[], bool],
    ) -> None:
        self.commands = commands
        self.root = root
        self.cwd: PurePosixPath | None = cwd
        self._probe = dirty
        self._dirty: bool | None = None
        self.holders = {c.parent for c in commands if c.via in ("wrapper", "inline-code")}

    def dirty(self) -> bool:
        if self._dirty is None:
            self._dirty = self._probe()
        return self._dirty

    def resolve(self, word: str) -> PurePosixPath | None:
        """Where `word` points, lexically; None when that depends on run time or on $HOME."""
        if _dynamic(word) or word.startswith("~") or word == "-":
            return None
        if word.startswith("/"):
            return _normal(word)
        return None if self.cwd is None else _normal(f"{self.cwd}/{word}")

    def inside(self, path: PurePosixPath) -> bool:
        return path.is_relative_to(self.root)

    def follow(self, command: SimpleCommand) -> None:
        """Move the current directory as `cd DIR` / `pushd DIR` would."""
        if command.name in ("cd", "pushd"):
            operands = [w for w in command.words[1:] if not (w.startswith("-") and len(w) > 1)]
            self.cwd = self.resolve(operands[0]) if operands else None
        elif command.name == "popd":
            self.cwd = None

    def parent_name(self, command: SimpleCommand) -> str:
        return "" if command.parent is None else self.commands[command.parent].name


def _dangers(command: SimpleCommand, index: int, scan: _Scan) -> list[tuple[str, str]]:
    """(text, reason) for every danger of one command (a bare `> file` has no words)."""
    name = command.name
    reasons: list[str] = []
    check = _CHECKS.get(name)
    if check is not None:
        reasons += check(command, scan)
    if name.startswith("mkfs") or name in ("mke2fs", "wipefs"):
        reasons.append(f"it formats or wipes a disk ({command.text}), destroying its data")
    if published := _publish(command):
        reasons.append(published)
    reasons += _ci_writes(command, scan)
    reasons += _device_writes(command)
    if index not in scan.holders and name not in _SEARCHERS:
        reasons += _sql(command, scan)
    out = [(command.text, r) for r in reasons]
    return out + _downloads(command, scan)


# -- rm, chmod, chown ----------------------------------------------------------------------------


def _rm(command: SimpleCommand, scan: _Scan) -> list[str]:
    flags, targets = _split(command.words[1:])
    if not any(f == "--recursive" or (f[1] != "-" and "r" in f.lower()) for f in flags):
        return []
    finder = scan.parent_name(command)
    if not targets and command.dynamic and finder == "xargs":
        return ["it deletes recursively whatever paths xargs reads from its input"]
    if finder == "find" and command.parent is not None and any("{}" in t for t in targets):
        starts = _find_starts(scan.commands[command.parent].words)
        return [r for s in starts if (r := _outside(s, scan, "it deletes files found in", ""))]
    reasons = []
    for target in targets:
        path = scan.resolve(target)
        if path == scan.root:
            reasons.append(f"it deletes {target}: the whole workspace, .git and uncommitted work")
        elif path == scan.root / ".git":
            reasons.append(f"it deletes {target}: the repository's history")
        else:
            reasons.append(_outside(target, scan, "it deletes", "recursively"))
    return [r for r in reasons if r]


def _find(command: SimpleCommand, scan: _Scan) -> list[str]:
    if "-delete" not in command.words:
        return []
    starts = _find_starts(command.words)
    return [r for s in starts if (r := _outside(s, scan, "it deletes files found in", ""))]


def _outside(word: str, scan: _Scan, verb: str, how: str) -> str:
    """Why acting on `word` reaches outside the workspace; "" when it stays inside."""
    verb = f"{verb} {word} {how}".rstrip()
    if _dynamic(word):
        return f"{verb}, a path only known when it runs"
    if word.startswith("~"):
        return f"{verb}, in the home directory outside the workspace"
    path = scan.resolve(word)
    if path is None:
        return f"{verb} after a cd to a directory only known when it runs"
    if path == PurePosixPath("/") or (path.parent == PurePosixPath("/") and word.endswith("*")):
        return f"{verb}: the whole file system"
    if not scan.inside(path):
        return f"{verb}, outside the workspace ({path})"
    return ""


def _chmod(command: SimpleCommand, scan: _Scan) -> list[str]:
    flags, operands = _split(command.words[1:])
    if not operands:
        return []
    recursive = any(f == "--recursive" or (f[1] != "-" and "R" in f) for f in flags)
    mode, targets = operands[0], operands[1:]
    if recursive and _world_writable(mode):
        return [f"it makes everything under {' '.join(targets)} writable by every user ({mode})"]
    reasons = []
    for target in targets:
        if _world_writable(mode):
            reasons.append(_outside(target, scan, "it makes", "world-writable"))
        elif recursive:
            reasons.append(_outside(target, scan, "it changes permissions of", "recursively"))
    return [r for r in reasons if r]


def _chown(command: SimpleCommand, scan: _Scan) -> list[str]:
    flags, operands = _split(command.words[1:])
    if not any(f == "--recursive" or (f[1] != "-" and "R" in f) for f in flags):
        return []
    how = "recursively"
    verb = f"it changes the owner of{'' if command.name == 'chown' else ' (group)'}"
    return [r for t in operands[1:] if (r := _outside(t, scan, verb, how))]


def _world_writable(mode: str) -> bool:
    if re.fullmatch(r"[0-7]{3,4}", mode):
        return int(mode[-1]) & 2 == 2
    clauses = [re.fullmatch(r"([ugoa]*)([-+=])([rwxXst]*)", c) for c in mode.split(",")]
    return any(m and ("o" in m[1] or "a" in m[1]) and m[2] != "-" and "w" in m[3] for m in clauses)


def _find_starts(words: Sequence[str]) -> list[str]:
    starts = []
    for word in words[1:]:
        if word.startswith(("-", "(", "!")):
            break
        starts.append(word)
    return starts or ["."]


# -- git -----------------------------------------------------------------------------------------

_GIT_GLOBAL_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})
_WHOLE_TREE = frozenset({".", "./", "*", ":/", ":/*", ":(top)"})


def _git(command: SimpleCommand, scan: _Scan) -> list[str]:
    args = command.words[1:]
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _GIT_GLOBAL_VALUE else 1
    if i >= len(args):
        return []
    sub, rest = args[i], args[i + 1 :]
    flags, operands = _split(rest)
    letters = "".join(f[1:] for f in flags if f[1] != "-")
    longs = {f.partition("=")[0] for f in flags if f.startswith("--")}
    if sub == "push":
        return _push(letters, longs, operands)
    if sub == "config":
        return _git_config(rest)
    always = {
        "filter-branch": "it rewrites every commit of the branch (git filter-branch)",
        "filter-repo": "it rewrites the repository's whole history (git filter-repo)",
    }
    if sub in always:
        return [always[sub]]
    if sub == "update-ref" and ("d" in letters or "--delete" in longs):
        return ["it deletes a git ref directly, bypassing git's safety checks"]
    if sub == "reflog" and operands[:1] in (["expire"], ["delete"]):
        return ["it expires reflog entries, the record that lets lost commits be recovered"]
    if sub == "gc" and any(f in ("--prune=now", "--prune=all") for f in flags):
        return ["it prunes unreachable objects now, so lost commits can no longer be recovered"]
    deleting = "d" in letters or "--delete" in longs
    forced = "f" in letters or "--force" in longs
    if sub == "branch" and ("D" in letters or (deleting and forced)):
        return [f"it force-deletes the branch {' '.join(operands)} even if it is not merged"]
    if sub == "stash" and operands[:1] in (["drop"], ["clear"]):
        return [f"it deletes stashed work (git stash {operands[0]}), which git cannot restore"]
    dry = "n" in letters or "--dry-run" in longs
    if sub == "clean" and forced and not dry:
        if "x" in letters or "X" in letters:
            return [
                "it deletes ignored files (such as .env or local settings) that git cannot "
                "restore (git clean -x)"
            ]
        if scan.dirty():
            return ["it deletes untracked files, which git cannot restore (git clean -f)"]
        return []
    return _discards(sub, letters, longs, flags, operands, scan)


def _discards(
    sub: str,
    letters: str,
    longs: set[str],
    flags: list[str],
    operands: list[str],
    scan: _Scan,
) -> list[str]:
    """Commands that throw away uncommitted work; flagged only when there is some."""
    reason = ""
    if sub == "reset" and "--hard" in longs:
        reason = "it discards uncommitted changes to tracked files (git reset --hard)"
    elif sub == "checkout" and ("f" in letters or "--force" in longs):
        reason = "it discards uncommitted changes (git checkout --force)"
    elif sub == "checkout" and any(_whole_tree(p, scan) for p in operands):
        reason = "it discards every uncommitted change in the work tree (git checkout .)"
    elif sub == "restore" and any(_whole_tree(p, scan) for p in operands):
        staged_only = ("S" in letters or "--staged" in longs) and not (
            "W" in letters or "--worktree" in longs
        )
        if not staged_only:
            reason = "it discards every uncommitted change in the work tree (git restore .)"
    return [reason] if reason and scan.dirty() else []


def _whole_tree(pathspec: str, scan: _Scan) -> bool:
    if pathspec in _WHOLE_TREE:
        return True
    path = scan.resolve(pathspec)
    return path is not None and scan.cwd is not None and scan.cwd.is_relative_to(path)


def _push(letters: str, longs: set[str], operands: list[str]) -> list[str]:
    reasons = []
    if "f" in letters or "--force" in longs or "--force-with-lease" in longs:
        reasons.append("it force-pushes, rewriting history on the remote")
    elif any(o.startswith("+") for o in operands):
        reasons.append("it force-pushes a +refspec, rewriting history on the remote")
    if "--mirror" in longs:
        reasons.append("it mirror-pushes, overwriting or deleting every ref on the remote")
    if "d" in letters or "--delete" in longs or any(re.fullmatch(r":\S+", o) for o in operands):
        reasons.append("it deletes a branch or tag on the remote")
    if "--prune" in longs:
        reasons.append("it deletes remote branches that have no local counterpart")
    return reasons


_CONFIG_READS = frozenset({"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list"})
_CONFIG_READS |= {"-l", "--get-color", "--get-colorbool"}
_CONFIG_WRITES = frozenset({"--unset", "--unset-all", "--add", "--replace-all", "--edit", "-e"})
_CONFIG_WRITES |= {"--remove-section", "--rename-section"}
_CONFIG_VALUE = frozenset({"-f", "--file", "--blob", "--type", "--default", "--comment"})


def _git_config(args: Sequence[str]) -> list[str]:
    flags, operands, i = [], [], 0
    while i < len(args):
        if args[i].startswith("-"):
            flags.append(args[i])
            i += 1 + (args[i] in _CONFIG_VALUE)
        else:
            operands.append(args[i])
            i += 1
    if operands[:1] in (["get"], ["list"]) or any(f in _CONFIG_READS for f in flags):
        return []
    if operands[:1] in (["set"], ["unset"], ["edit"], ["rename-section"], ["remove-section"]):
        operands = operands[1:]
        writes = True
    else:
        writes = len(operands) >= 2 or any(f in _CONFIG_WRITES for f in flags)
    if not writes:
        return []
    scope = next((f for f in flags if f in ("--global", "--system")), "")
    key = operands[0] if operands else ""
    if scope:
        where = "every repository of this user" if scope == "--global" else "every user"
        return [f"it changes git configuration for {where} (git config {scope} {key})".strip()]
    if git_key_runs_code(key):
        return [f"it sets git config {key}, which makes later git commands run a program"]
    return []


# -- publishing, system, devices -----------------------------------------------------------------


def _publish(command: SimpleCommand) -> str:
    name, args = command.name, command.words[1:]
    if "--dry-run" in args:
        return ""
    ops = [a for a in args if not a.startswith("-")]
    if name in ("npm", "pnpm", "yarn") and "publish" in ops[:2]:
        return f"it publishes a package to the registry ({name} publish), which cannot be undone"
    if name == "npm" and "unpublish" in ops[:2]:
        return "it removes a published package from the npm registry (npm unpublish)"
    if name == "twine" or (is_interpreter(name) and args[:2] == ("-m", "twine")):
        return "it uploads packages to PyPI (twine upload)" if "upload" in ops[:2] else ""
    first = ops[0] if ops else ""
    tools = {"cargo", "poetry", "uv", "flit", "hatch"}
    if (name in tools and first == "publish") or (name == "gem" and first == "push"):
        return f"it publishes a package to a public registry ({name} {first})"
    if name in ("docker", "podman") and (first == "push" or ops[:2] == ["image", "push"]):
        return f"it pushes an image to a container registry ({name} push)"
    if name == "gh" and ops[:2] == ["release", "create"]:
        return "it creates a GitHub release, visible to everyone who watches the repository"
    if name in ("mvn", "mvnw") and any(o == "deploy" or o.endswith(":deploy") for o in ops):
        return "it deploys artifacts to a remote Maven repository (mvn deploy)"
    if name in ("gradle", "gradlew") and any(
        o.startswith("publish") and o != "publishToMavenLocal" for o in ops
    ):
        return "it publishes artifacts to a remote repository (gradle publish)"
    if name == "dotnet" and ops[:2] == ["nuget", "push"]:
        return "it pushes a package to a NuGet feed (dotnet nuget push)"
    return ""


def _as_user(command: SimpleCommand, scan: _Scan) -> list[str]:
    return [f"it runs a command as another user ({command.name}), outside Kestrel's limits"]


def _power(command: SimpleCommand, scan: _Scan) -> list[str]:
    return [f"it shuts down or restarts the machine ({command.name})"]


def _kill(command: SimpleCommand, scan: _Scan) -> list[str]:
    args = list(command.words[1:])
    if args[:1] == ["--"]:
        args = args[1:]
    elif len(args) > 1 and args[0].startswith("-"):
        args = args[2:] if args[0] in ("-s", "-n") else args[1:]  # the signal
    if "-1" in args or command.words[1:] == ("-1",):
        return ["it signals every process the user owns (kill -1), which ends the session"]
    return []


def _crontab(command: SimpleCommand, scan: _Scan) -> list[str]:
    flags, operands = _split(command.words[1:])
    if any("r" in f for f in flags):
        return ["it removes the user's crontab (crontab -r)"]
    if operands or "-" in command.words[1:]:
        return ["it replaces the user's crontab, which schedules commands to run later"]
    return []


def _systemctl(command: SimpleCommand, scan: _Scan) -> list[str]:
    ops = [a for a in command.words[1:] if not a.startswith("-")]
    verb = ops[0] if ops else ""
    if verb in ("stop", "disable", "mask", "kill"):
        return [f"it {verb}s system services (systemctl {' '.join(ops)})"]
    if verb in ("reboot", "poweroff", "halt"):
        return [f"it shuts down or restarts the machine (systemctl {verb})"]
    return []


_HARMLESS_DEVICES = frozenset({"/dev/null", "/dev/zero", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_DISK = re.compile(r"/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-|mapper/)\S*")


def _device_writes(command: SimpleCommand) -> list[str]:
    targets = [r.target for r in command.redirects if ">" in r.op and _DISK.fullmatch(r.target)]
    if command.name == "dd":
        outputs = [w[3:] for w in command.words[1:] if w.startswith("of=")]
        targets += [o for o in outputs if o.startswith("/dev/") and o not in _HARMLESS_DEVICES]
    return [f"it writes raw data to the device {t}, destroying what it holds" for t in targets]


# -- writes to CI and git hooks ------------------------------------------------------------------

_PROTECTED = (
    (".github/workflows", "a GitHub Actions workflow, which runs in CI with the repo's secrets"),
    (".gitlab-ci.yml", "the GitLab CI pipeline, which runs with the project's secrets"),
    (".circleci", "CircleCI configuration, which runs in CI with the project's secrets"),
    ("azure-pipelines.yml", "an Azure Pipelines definition, which runs in CI with secrets"),
    ("Jenkinsfile", "the Jenkins pipeline, which runs in CI with its credentials"),
    (".git/hooks", "a git hook, which runs on later git commands"),
    (".git/config", "the repository's git config, which can make git run programs"),
    (".husky", "a Husky git hook, which runs on later git commands"),
)  # fmt: skip
_TOUCHERS = frozenset({"touch", "rm", "unlink", "truncate", "shred", "rmdir", "mkdir"})
_TAKES_FIRST = frozenset({"chmod", "chown", "chgrp"})  # the first operand is a mode or owner


def _protected(rel: str) -> str | None:
    for prefix, what in _PROTECTED:
        if rel == prefix or rel.startswith(prefix + "/"):
            return what
    return None


def _ci_writes(command: SimpleCommand, scan: _Scan) -> list[str]:
    reasons = []
    for word in _written(command):
        path = scan.resolve(word)
        if path is None or not scan.inside(path):
            continue
        what = _protected(path.relative_to(scan.root).as_posix())
        if what is not None:
            reasons.append(f"it writes {word}, {what}")
    return reasons


def _written(command: SimpleCommand) -> list[str]:
    """Paths the command writes, moves, deletes or changes the mode of."""
    out = [
        r.target
        for r in command.redirects
        if ">" in r.op and r.target and not re.fullmatch(r"\d+|-", r.target)
    ]
    name, args = command.name, command.words[1:]
    flags, operands = _split(args)
    if name == "tee" or name in _TOUCHERS or name == "mv":
        out += operands
    elif name in _TAKES_FIRST:
        out += operands[1:]
    elif name in ("cp", "install", "ln"):
        target = [a.partition("=")[2] for a in args if a.startswith("--target-directory=")]
        target += [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-t"]
        out += target or operands[-1:]
    elif name == "sed" and any(
        f.startswith("--in-place") or (f[1] != "-" and "i" in f) for f in flags
    ):
        scripted = any(f in ("-e", "-f", "--expression", "--file") for f in flags)
        out += operands if scripted else operands[1:]
    elif name == "dd":
        out += [a[3:] for a in args if a.startswith("of=")]
    return out


# -- SQL and downloads ---------------------------------------------------------------------------

_SEARCHERS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "git"})
_DB_CLIENTS = frozenset({"psql", "mysql", "mariadb", "sqlite3", "sqlcmd", "duckdb", "cockroach"})
_DB_CLIENTS |= {"clickhouse-client", "clickhouse", "snowsql", "bq", "pgcli", "mycli", "litecli"}
_SQL_DROP = re.compile(r"\bDROP\s+(TABLE|DATABASE|SCHEMA)\b[^;]*", re.IGNORECASE)
_SQL_TRUNCATE = re.compile(r"\bTRUNCATE\s+(TABLE\s+)?[`\"\[]?\w[^;]*", re.IGNORECASE)
_SQL_DELETE = re.compile(r"\bDELETE\s+FROM\s+[^\s;]+[^;]*", re.IGNORECASE)
_WHERE = re.compile(r"\bWHERE\b", re.IGNORECASE)


def _sql(command: SimpleCommand, scan: _Scan) -> list[str]:
    texts = list(command.words[1:])
    inputs = [r.body or r.target for r in command.redirects if r.op.startswith("<<")]
    if inputs and any(
        c.name in _DB_CLIENTS and c.pipeline == command.pipeline and c.stage >= command.stage
        for c in scan.commands
    ):
        texts += inputs  # a heredoc counts when a database client reads it, not a file written
    reasons = []
    for text in texts:
        hits = [m.group() for m in (*_SQL_DROP.finditer(text), *_SQL_TRUNCATE.finditer(text))]
        hits += [m.group() for m in _SQL_DELETE.finditer(text) if not _WHERE.search(m.group())]
        reasons += [f"it runs SQL that destroys data: {' '.join(h.split())}" for h in hits]
    return reasons


_DOWNLOADERS = frozenset({"curl", "wget", "fetch"})


def _downloads(command: SimpleCommand, scan: _Scan) -> list[tuple[str, str]]:
    """Downloaded code that runs unseen: `curl x | sh`, `sh <(curl x)`, `bash -c "$(curl x)"`."""
    if command.name not in _DOWNLOADERS:
        return []
    out = []
    for other in scan.commands:
        if (
            other.pipeline == command.pipeline
            and other.stage > command.stage
            and reads_program_from_stdin(other.words)
        ):
            reason = f"it pipes a download from {command.name} straight into {other.name}"
            out.append((other.text, f"{reason}, running code nobody has read"))
    if command.parent is not None and command.via in ("substitution", "process-substitution"):
        runner = scan.commands[command.parent]
        if is_interpreter(runner.name) or runner.name in ("source", ".", "eval"):
            reason = f"it runs code downloaded by {command.name} through {runner.name}"
            out.append((runner.text, f"{reason} without anyone reading it"))
    return out


# -- helpers -------------------------------------------------------------------------------------


def _split(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """Options and operands; options may follow operands, and `--` ends them."""
    flags, operands, ended = [], [], False
    for arg in args:
        if not ended and arg == "--":
            ended = True
        elif not ended and len(arg) > 1 and arg.startswith("-"):
            flags.append(arg)
        else:
            operands.append(arg)
    return flags, operands


def _dynamic(word: str) -> bool:
    return "$" in word or "`" in word


def _normal(path: str) -> PurePosixPath:
    return PurePosixPath(posixpath.normpath(path))


_CHECKS: dict[str, Callable[[SimpleCommand, _Scan], list[str]]] = {
    "rm": _rm,
    "find": _find,
    "chmod": _chmod,
    "chown": _chown,
    "chgrp": _chown,
    "git": _git,
    "sudo": _as_user,
    "su": _as_user,
    "doas": _as_user,
    "pkexec": _as_user,
    "shutdown": _power,
    "reboot": _power,
    "halt": _power,
    "poweroff": _power,
    "kill": _kill,
    "crontab": _crontab,
    "systemctl": _systemctl,
}
