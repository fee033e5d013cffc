"""The classifier's checks of what a command writes, moves or deletes: CI definitions and the git
metadata the host's git reads, credential folders in the home directory, logs outside the
workspace, and raw writes to block devices."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath

from kestrel.policy.classify_scan import Scan, split
from kestrel.policy.shell import SimpleCommand

# -- CI definitions and git metadata -------------------------------------------------------------

_PROTECTED = (
    (".github/workflows", "a GitHub Actions workflow, which runs in CI with the repo's secrets"),
    (".gitlab-ci.yml", "the GitLab CI pipeline, which runs with the project's secrets"),
    (".circleci", "CircleCI configuration, which runs in CI with the project's secrets"),
    ("azure-pipelines.yml", "an Azure Pipelines definition, which runs in CI with secrets"),
    ("Jenkinsfile", "the Jenkins pipeline, which runs in CI with its credentials"),
    (".git/hooks", "a git hook, which runs on later git commands"),
    (".git/config", "the repository's git config, which can make git run programs"),
    (".git/config.worktree", "per-worktree git config, which can make git run programs"),
    (".husky", "a Husky git hook, which runs on later git commands"),
    (".gitmodules", "the submodule list, which tells git what to fetch and where"),
    (".git/info/attributes", "git attributes, which can make git run filter programs"),
    (".git/commondir", "the pointer to git's shared data, which can aim git at other config"),
    (".git/objects/info/alternates", "a list of other object stores git reads objects from"),
    (".git/modules", "a submodule's git data (its config and hooks), which git runs"),
    (".git/worktrees", "a linked worktree's git data, which git follows to config and hooks"),
)  # fmt: skip
_DOT_GIT = "the repository's .git, which tells git where its config and hooks are"
_NESTED_GIT = "a submodule's or nested repository's .git, which git follows to config and hooks"
_TOUCHERS = frozenset({"touch", "rm", "unlink", "truncate", "shred", "rmdir", "mkdir"})
_TAKES_FIRST = frozenset({"chmod", "chown", "chgrp"})  # the first operand is a mode or owner


def protected(rel: str) -> str | None:
    """What the workspace path `rel` is, when writing it runs code or changes what git does."""
    if rel == ".git":
        return _DOT_GIT
    for prefix, what in _PROTECTED:
        if rel == prefix or rel.startswith(prefix + "/"):
            return what
    if ".git" in rel.split("/")[1:]:
        return _NESTED_GIT
    return None


def ci_writes(command: SimpleCommand, scan: Scan) -> list[str]:
    """Writes to CI definitions, git hooks and the git metadata git reads."""
    reasons = []
    for word in written(command):
        path = scan.resolve(word)
        if path is None or not scan.inside(path):
            continue
        what = protected(path.relative_to(scan.root).as_posix())
        if what is not None:
            reasons.append(f"it writes {word}, {what}")
    return reasons


def written(command: SimpleCommand) -> list[str]:
    """Paths the command writes, moves, deletes or changes the mode of."""
    out = [
        r.target
        for r in command.redirects
        if ">" in r.op and r.target and not re.fullmatch(r"\d+|-", r.target)
    ]
    name, args = command.name, command.words[1:]
    takes = _TRUNCATE_VALUE if name == "truncate" else frozenset()
    flags, operands = split(args, takes)
    if name == "tee" or name in _TOUCHERS or name == "mv" or _removes_sources(name, args):
        out += operands
    elif name in _TAKES_FIRST:
        out += operands[1:]
    elif name in ("cp", "install", "ln", "rsync"):
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


def _removes_sources(name: str, args: Sequence[str]) -> bool:
    """`rsync --remove-source-files`, `tar --remove-files`: the sources go too."""
    return (name == "rsync" and "--remove-source-files" in args) or (
        name == "tar" and "--remove-files" in args
    )


_TRUNCATE_VALUE = frozenset({"-s", "--size", "-r", "--reference"})

# -- credentials in the home directory -----------------------------------------------------------

_SECRETS = {
    ".ssh": "SSH keys",
    ".aws": "AWS credentials",
    ".gnupg": "GPG keys",
    ".kube": "Kubernetes credentials",
    ".config/gcloud": "Google Cloud credentials",
    ".azure": "Azure credentials",
    ".docker": "container registry credentials",
    ".netrc": "login passwords",
    ".git-credentials": "git's saved passwords and tokens",
    ".config/gh": "the GitHub CLI's token",
    ".pgpass": "PostgreSQL passwords",
    ".pypirc": "PyPI upload tokens",
    ".npmrc": "npm tokens",
    ".password-store": "saved passwords",
    ".terraform.d": "Terraform Cloud tokens",
    ".vault-token": "a Vault token",
}
_HOME = re.compile(r"(~[^/]*|\$HOME|\$\{HOME\}|/root|/home/[^/]+)(/.*)?")
_VERBS = {"mv": "moves", "rm": "deletes", "rmdir": "deletes", "unlink": "deletes"}
_VERBS |= {"shred": "shreds", "truncate": "empties", "chmod": "changes the permissions of"}
_VERBS |= {"chown": "changes the owner of", "chgrp": "changes the group of"}
_VERBS |= {"rsync": "copies over or moves away", "tar": "archives and deletes"}


def secret_writes(command: SimpleCommand, scan: Scan) -> list[str]:
    """Moving, deleting or overwriting a credential folder of the home directory, or the home
    directory itself; reading them is left to Read rules."""
    verb = _VERBS.get(command.name, "overwrites")
    reasons = []
    into = _destination(command)
    for word in written(command):
        held = _secret(word, scan)
        if held and not (word == into and held == _WHOLE_HOME):  # `mv notes.txt ~` is fine
            reasons.append(f"it {'writes into' if word == into else verb} {word}, {held}")
    fed = scan.parent_name(command) == "xargs" and command.name in _VERBS
    runtime = fed or any("$" in w for w in written(command))
    if runtime and not reasons and (named := loops_over(scan.source, _SECRET_NAMED)):
        reasons.append(f"it {verb} paths only known when it runs, taken from {named}")
    return reasons


def loops_over(source: str, folder: re.Pattern[str]) -> str:
    """The folder of `folder` whose entries a loop or pipe of the command line walks
    (`for f in ~/.ssh/*`, `find /var/log | xargs ...`, `ls ~/.aws | while read f`); "" if none."""
    for match in folder.finditer(source):
        before, after = source[: match.start()], source[match.end() :]
        if re.search(r"\bfor\s+\w+\s+in\s+[^;\n]*$", before):
            return match.group()
        if re.match(r"[^|;\n]*\|.*\b(while\s+read|xargs)\b", after, re.DOTALL):
            return match.group()
    return ""


_LOG_NAMED = re.compile(r"/var/log|/var/adm")
_WHOLE_HOME = "the home directory itself, with every credential and setting in it"
_SECRET_NAMED = re.compile(
    r"(~|\$HOME|\$\{HOME\}|/root|/home/[^/\s]+)/\.(ssh|aws|gnupg|kube|docker|azure|netrc"
    r"|git-credentials|config/gcloud|config/gh|pgpass|pypirc|npmrc|password-store)"
)


def _destination(command: SimpleCommand) -> str:
    """The folder a move or copy puts things into, when the command has one."""
    if command.name not in ("mv", "cp", "ln", "rsync", "install") or len(command.words) < 3:
        return ""
    operands = split(command.words[1:])[1]
    return operands[-1] if operands else ""


def home_secret(word: str) -> str:
    """What `word` holds when it names the home directory or a credential folder in it
    (`~`, `~/.ssh`, `$HOME/.aws/credentials`, `~/.s*`, `~/.ssh{,.bak}`); "" otherwise."""
    match = _HOME.fullmatch(word.rstrip("/") or word)
    if match is None:
        return ""
    rest = [p for p in (match[2] or "").split("/") if p not in ("", ".")]
    if not rest:
        return _WHOLE_HOME
    return _held(rest)


def _secret(word: str, scan: Scan) -> str:
    if held := home_secret(word):
        return held
    path = scan.resolve(word)  # `cd /root && rm .ssh/id_rsa`, or a workspace that is home
    if path is not None and (held := home_secret(str(path))):
        return held
    if scan.cwd is not None or word.startswith("/") or word.startswith("~") or "$" in word:
        return ""
    if _HOME.fullmatch(scan.cwd_word.rstrip("/") or "/"):  # after `cd ~/.ssh`
        return home_secret(f"{scan.cwd_word.rstrip('/')}/{word}")
    return _held([p for p in word.split("/") if p not in ("", ".")])  # after `cd $DIR`


def _held(parts: list[str]) -> str:
    """What a credential folder under home holds, when `parts` (a path below home, maybe with
    globs or braces) is it, is inside it, or contains it."""
    for folder, what in _SECRETS.items():
        names = folder.split("/")
        common = min(len(names), len(parts))
        if all(_matches(names[i], parts[i]) for i in range(common)):
            return f"which holds {what}"
    return ""


def _matches(name: str, pattern: str) -> bool:
    """Whether the shell pattern `pattern` (globs, `{a,b}` braces) matches the dot-name `name`."""
    if not any(c in pattern for c in "*?[{"):
        return name == pattern
    if not pattern.startswith((".", "{", "[")):
        return False  # a glob matches a dot-name only when it starts with a dot
    return fnmatch.fnmatchcase(name, re.sub(r"\{[^{}]*\}", "*", pattern))


# -- logs ----------------------------------------------------------------------------------------

_LOG_DIRS = (PurePosixPath("/var/log"), PurePosixPath("/var/adm"))
_SCRATCH = tuple(PurePosixPath(p) for p in ("/tmp", "/var/tmp", "/dev/shm"))  # noqa: S108
_LOG_ERASERS = frozenset(
    {"truncate", "rm", "unlink", "shred", "mv", "cp", "dd", "tee", "sed", "ln"}
)


def log_writes(command: SimpleCommand, scan: Scan) -> list[str]:
    """Emptying, deleting or rewriting a log outside the workspace (`> /var/log/x`,
    `truncate -s 0 /var/log/syslog`, `rm /var/log/auth.log`)."""
    words = [r.target for r in command.redirects if r.op in (">", ">|", "&>", "1>")]
    appends = command.name == "tee" and any(w in ("-a", "--append") for w in command.words)
    if command.name in _LOG_ERASERS and not appends:
        words += written(command)
    reasons = [_log(word, scan, "the log", "the system log") for word in dict.fromkeys(words)]
    fed = scan.parent_name(command) == "xargs" and command.name in _LOG_ERASERS
    runtime = fed or any(w == "" or "$" in w for w in words)
    if runtime and (named := loops_over(scan.source, _LOG_NAMED)):
        reasons.append(f"it empties or deletes logs only known when it runs, taken from {named}")
    for start in _found_logs(command, scan):
        reasons.append(_log(start, scan, "logs found in", "system logs found in"))
    return [r for r in reasons if r]


def _log(word: str, scan: Scan, what: str, system: str) -> str:
    path = scan.resolve(word)
    is_log = word.endswith((".log", "_history")) or any(
        p in word for p in (".log.", "/log/", "/logs/")
    )
    if path is None:
        if is_log and (word.startswith("~") or "$" in word):
            return f"it empties or deletes {what} {word} outside the workspace"
        return ""
    if any(path.is_relative_to(d) for d in _LOG_DIRS):
        return f"it empties or deletes {system} {word}, the machine's record"
    if is_log and not scan.inside(path) and not any(path.is_relative_to(d) for d in _SCRATCH):
        return f"it empties or deletes {what} {word} outside the workspace"
    return ""


def _found_logs(command: SimpleCommand, scan: Scan) -> list[str]:
    """`find /var/log ... -exec truncate -s 0 {} ;`: the folders searched stand for `{}`."""
    if command.name not in ("truncate", "shred", "rm", "unlink"):
        return []
    starts = scan.found_in(command, command.words[1:])
    return list(starts or [])


def journal(command: SimpleCommand, scan: Scan) -> list[str]:
    """`journalctl --vacuum-size/--vacuum-time/--vacuum-files` deletes the system journal."""
    vacuum = [w for w in command.words[1:] if w.startswith("--vacuum-")]
    if vacuum:
        return [f"it deletes system journal entries ({vacuum[0]}), the machine's logs"]
    return []


# -- block devices -------------------------------------------------------------------------------

_HARMLESS_DEVICES = frozenset({"/dev/null", "/dev/zero", "/dev/stdout", "/dev/stderr", "/dev/tty"})
DISK = re.compile(r"/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-|mapper/|loop|sr|root)\S*")


def device_writes(command: SimpleCommand) -> list[str]:
    """Raw writes to a disk: `dd of=/dev/sda`, `> /dev/nvme0n1`, `cp img /dev/sdb`."""
    targets = [r.target for r in command.redirects if ">" in r.op and DISK.fullmatch(r.target)]
    if command.name == "dd":
        outputs = [w[3:] for w in command.words[1:] if w.startswith("of=")]
        targets += [o for o in outputs if o.startswith("/dev/") and o not in _HARMLESS_DEVICES]
    elif command.name in ("cp", "tee", "pv", "cat", "install"):
        targets += [w for w in written(command) if DISK.fullmatch(w)]
    unique = dict.fromkeys(targets)
    return [f"it writes raw data to the device {t}, destroying what it holds" for t in unique]


_GPG_DELETES: tuple[str, ...] = (
    "--delete-secret-keys",
    "--delete-keys",
    "--delete-secret-and-public-keys",
)
_GPG_DELETES += ("--delete-key", "--delete-secret-key", "--delete-secret-and-public-key")


def _gpg(command: SimpleCommand, scan: Scan) -> list[str]:
    hits = [w for w in command.words[1:] if w in _GPG_DELETES]
    if hits:
        return [f"it deletes keys from the GPG keyring ({command.name} {hits[0]})"]
    return []


CHECKS: dict[str, Callable[[SimpleCommand, Scan], list[str]]] = {
    "journalctl": journal,
    "gpg": _gpg,
    "gpg2": _gpg,
}
