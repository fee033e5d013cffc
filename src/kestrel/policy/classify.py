"""Irreversible or dangerous actions in a parsed shell command or an edit, each with a sentence
the person can act on. Pure: the only outside question is `dirty()`, asked at most once."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kestrel.policy import (
    classify_cloud,
    classify_containers,
    classify_data,
    classify_devices,
    classify_files,
    classify_infra,
)
from kestrel.policy.classify_files import (
    ci_writes,
    device_writes,
    log_writes,
    protected,
    secret_writes,
)
from kestrel.policy.classify_git import check_git
from kestrel.policy.classify_inline import embedded_commands
from kestrel.policy.classify_scan import Check, Scan, find_starts, normal, outside, split
from kestrel.policy.shell import (
    ShellParse,
    SimpleCommand,
    is_interpreter,
    parse_shell,
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
    scan = Scan(parsed.commands, PurePosixPath(root), PurePosixPath(cwd), dirty)
    scan.source = parsed.source
    found: dict[tuple[str, str], Danger] = {}
    for index, command in enumerate(parsed.commands):
        for text, reason in _dangers(command, index, scan):
            found.setdefault((text, reason), Danger(command=text, reason=reason))
        for line, how in embedded_commands(command):
            here = Path(scan.cwd) if scan.cwd is not None else root
            for inner in classify_shell(parse_shell(line), root=root, cwd=here, dirty=scan.dirty):
                reason = f"{inner.reason} ({how})"
                found.setdefault(
                    (command.text, reason), Danger(command=command.text, reason=reason)
                )
        scan.follow(command)
    return list(found.values())


def classify_paths(paths: Iterable[str], *, root: Path) -> list[Danger]:
    """Edit targets that are CI definitions, git hooks or config, metadata git follows
    (`.gitmodules`, a submodule's `.git` file), or anything inside `.git/`."""
    base = PurePosixPath(root)
    dangers = []
    for raw in paths:
        path = normal(raw if raw.startswith("/") else f"{base}/{raw}")
        if not path.is_relative_to(base):
            continue
        rel = path.relative_to(base).as_posix()
        what = protected(rel)
        if what is None and (rel == ".git" or rel.startswith(".git/")):
            what = "part of git's own data, which a direct edit can corrupt"
        if what is not None:
            dangers.append(Danger(command=raw, reason=f"it edits {rel}, {what}"))
    return dangers


def _dangers(command: SimpleCommand, index: int, scan: Scan) -> list[tuple[str, str]]:
    """(text, reason) for every danger of one command (a bare `> file` has no words)."""
    name = command.name
    reasons: list[str] = []
    check = _CHECKS.get(name)
    if check is not None:
        reasons += check(command, scan)
    if formatted := classify_devices.formats(command):
        reasons.append(formatted)
    if published := _publish(command):
        reasons.append(published)
    reasons += ci_writes(command, scan)
    reasons += device_writes(command)
    reasons += secret_writes(command, scan)
    reasons += log_writes(command, scan)
    if index not in scan.holders and name not in classify_data.SEARCHERS:
        reasons += classify_data.sql(command, scan)
    out = [(command.text, r) for r in dict.fromkeys(reasons)]
    return out + _downloads(command, scan)


# -- rm, chmod, chown ----------------------------------------------------------------------------


def _rm(command: SimpleCommand, scan: Scan) -> list[str]:
    flags, targets = split(command.words[1:])
    if not any(f == "--recursive" or (f[1] != "-" and "r" in f.lower()) for f in flags):
        return []
    finder = scan.parent_name(command)
    if not targets and command.dynamic and finder == "xargs":
        return ["it deletes recursively whatever paths xargs reads from its input"]
    if finder == "find" and command.parent is not None and any("{}" in t for t in targets):
        starts = find_starts(scan.commands[command.parent].words)
        return [r for s in starts if (r := outside(s, scan, "it deletes files found in", ""))]
    reasons = []
    for target in targets:
        path = scan.resolve(target)
        if path == scan.root:
            reasons.append(f"it deletes {target}: the whole workspace, .git and uncommitted work")
        elif path == scan.root / ".git":
            reasons.append(f"it deletes {target}: the repository's history")
        else:
            reasons.append(outside(target, scan, "it deletes", "recursively"))
    return [r for r in reasons if r]


def _find(command: SimpleCommand, scan: Scan) -> list[str]:
    if "-delete" not in command.words:
        return []
    starts = find_starts(command.words)
    return [r for s in starts if (r := outside(s, scan, "it deletes files found in", ""))]


def _chmod(command: SimpleCommand, scan: Scan) -> list[str]:
    flags, operands = split(command.words[1:])
    if not operands:
        return []
    recursive = any(f == "--recursive" or (f[1] != "-" and "R" in f) for f in flags)
    mode, targets = operands[0], operands[1:]
    if recursive and _world_writable(mode):
        return [f"it makes everything under {' '.join(targets)} writable by every user ({mode})"]
    reasons = []
    for target in targets:
        if _world_writable(mode):
            reasons.append(outside(target, scan, "it makes", "world-writable"))
        elif recursive:
            reasons.append(outside(target, scan, "it changes permissions of", "recursively"))
    return [r for r in reasons if r]


def _chown(command: SimpleCommand, scan: Scan) -> list[str]:
    flags, operands = split(command.words[1:])
    if not any(f == "--recursive" or (f[1] != "-" and "R" in f) for f in flags):
        return []
    how = "recursively"
    verb = f"it changes the owner of{'' if command.name == 'chown' else ' (group)'}"
    return [r for t in operands[1:] if (r := outside(t, scan, verb, how))]


def _world_writable(mode: str) -> bool:
    if re.fullmatch(r"[0-7]{3,4}", mode):
        return int(mode[-1]) & 2 == 2
    clauses = [re.fullmatch(r"([ugoa]*)([-+=])([rwxXst]*)", c) for c in mode.split(",")]
    return any(m and ("o" in m[1] or "a" in m[1]) and m[2] != "-" and "w" in m[3] for m in clauses)


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


def _as_user(command: SimpleCommand, scan: Scan) -> list[str]:
    return [f"it runs a command as another user ({command.name}), outside Kestrel's limits"]


def _power(command: SimpleCommand, scan: Scan) -> list[str]:
    return [f"it shuts down or restarts the machine ({command.name})"]


def _kill(command: SimpleCommand, scan: Scan) -> list[str]:
    args = list(command.words[1:])
    if args[:1] == ["--"]:
        args = args[1:]
    elif len(args) > 1 and args[0].startswith("-"):
        args = args[2:] if args[0] in ("-s", "-n") else args[1:]  # the signal
    if "-1" in args or command.words[1:] == ("-1",):
        return ["it signals every process the user owns (kill -1), which ends the session"]
    return []


def _crontab(command: SimpleCommand, scan: Scan) -> list[str]:
    flags, operands = split(command.words[1:])
    if any("r" in f for f in flags):
        return ["it removes the user's crontab (crontab -r)"]
    if operands or "-" in command.words[1:]:
        return ["it replaces the user's crontab, which schedules commands to run later"]
    return []


def _systemctl(command: SimpleCommand, scan: Scan) -> list[str]:
    ops = [a for a in command.words[1:] if not a.startswith("-")]
    verb = ops[0] if ops else ""
    if verb in ("stop", "disable", "mask", "kill"):
        return [f"it {verb}s system services (systemctl {' '.join(ops)})"]
    if verb in ("reboot", "poweroff", "halt"):
        return [f"it shuts down or restarts the machine (systemctl {verb})"]
    return []


# -- downloads ---------------------------------------------------------------------------------

_DOWNLOADERS = frozenset({"curl", "wget", "fetch"})


def _downloads(command: SimpleCommand, scan: Scan) -> list[tuple[str, str]]:
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


_CHECKS: dict[str, Check] = {
    "rm": _rm,
    "find": _find,
    "chmod": _chmod,
    "chown": _chown,
    "chgrp": _chown,
    "git": check_git,
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
    **classify_files.CHECKS,
    **classify_data.CHECKS,
    **classify_devices.CHECKS,
    **classify_infra.CHECKS,
    **classify_cloud.CHECKS,
    **classify_containers.CHECKS,
}
