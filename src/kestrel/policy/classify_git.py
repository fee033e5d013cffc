"""The classifier's checks of git commands: history rewrites, force pushes, deleted refs and
stashes, discarded uncommitted work, and config that makes git run programs."""

from __future__ import annotations

import re
from collections.abc import Sequence

from kestrel.policy.classify_files import protected
from kestrel.policy.classify_scan import Scan, split
from kestrel.policy.shell import SimpleCommand, git_key_runs_code

_GIT_GLOBAL_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})
_WHOLE_TREE = frozenset({".", "./", "*", ":/", ":/*", ":(top)"})


def check_git(command: SimpleCommand, scan: Scan) -> list[str]:
    args = command.words[1:]
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _GIT_GLOBAL_VALUE else 1
    if i >= len(args):
        return []
    sub, rest = args[i], args[i + 1 :]
    flags, operands = split(rest)
    letters = "".join(f[1:] for f in flags if f[1] != "-")
    longs = {f.partition("=")[0] for f in flags if f.startswith("--")}
    if sub == "push":
        return _push(letters, longs, operands)
    if sub == "config":
        return _git_config(rest, scan)
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
    scan: Scan,
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


def _whole_tree(pathspec: str, scan: Scan) -> bool:
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


_READS_MORE = re.compile(r"include\.path|includeif\..+\.path|protocol\.(.+\.)?allow", re.I)


def _git_config(args: Sequence[str], scan: Scan) -> list[str]:
    flags, operands, files, i = [], [], [], 0
    while i < len(args):
        if args[i].startswith("-"):
            flags.append(args[i])
            if args[i] in ("-f", "--file") and i + 1 < len(args):
                files.append(args[i + 1])
            elif args[i].startswith("--file="):
                files.append(args[i].partition("=")[2])
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
    if _READS_MORE.fullmatch(key):
        return [f"it sets git config {key}, which makes git read config or run transports from "
                "elsewhere"]  # fmt: skip
    return [r for f in files if (r := _config_file(f, scan))]


def _config_file(word: str, scan: Scan) -> str:
    """Why `git config --file FILE` writing FILE matters: git metadata, or a file outside."""
    path = scan.resolve(word)
    if path is not None and scan.inside(path):
        what = protected(path.relative_to(scan.root).as_posix())
        return f"it writes {word} with git config, {what}" if what else ""
    return f"it writes the git config file {word}, outside the workspace"
