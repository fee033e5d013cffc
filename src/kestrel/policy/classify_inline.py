"""Command lines that a command runs without the shell parse seeing them: shell commands in
inline program code (`python -c "os.system('kubectl delete ns x')"`, a `python3 - <<EOF` heredoc
that calls `subprocess.run`), a remote command (`ssh host 'redis-cli flushall'`, `kubectl exec
pod -- ...`, `docker exec db ...`), and commands behind runners the parse does not unwrap
(`setsid`, `flock`, `chroot`, `strace`, `parallel`, `env -S`). The classifier reads each as a
command line of its own, so bypass mode does not let a carrier run what it would ask about when
written plainly."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from kestrel.policy.shell import SimpleCommand, is_interpreter, reads_program_from_stdin

_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh"})

_RUNS = re.compile(
    r"\b(system|popen|Popen|run|call|check_call|check_output|getoutput|getstatusoutput|exec"
    r"|execSync|execFileSync|spawn|spawnSync|execFile|shell_exec|passthru|spawnv?p?)\s*\(|`|\bqx"
)
_STRING = re.compile(
    r"'''(.*?)'''|\"\"\"(.*?)\"\"\"|'((?:[^'\\\n]|\\.)*)'|\"((?:[^\"\\\n]|\\.)*)\"|`([^`]*)`",
    re.DOTALL,
)
_LIST = re.compile(r"\[\s*((?:(['\"])[^'\"\n]*\2\s*,\s*)+(['\"])[^'\"\n]*\3)\s*,?\s*\]")
_ITEM = re.compile(r"(['\"])([^'\"\n]*)\1")
_MAX_CODE = 100_000
_MAX_LINES = 256  # string literals read as command lines, per command


def embedded_commands(command: SimpleCommand) -> list[tuple[str, str]]:
    """(command line, what runs it) for every command line `command` carries."""
    name = command.name
    code = [(line, f"a command its {name} code runs") for line in _code_commands(command)]
    return code + _carried(command)


def _code_commands(command: SimpleCommand) -> list[str]:
    """Command lines that inline code of `command` hands to a shell or to exec, as written."""
    name = command.name
    if not is_interpreter(name) or name in _SHELLS:
        return []
    code = "\n".join(command.words[1:])
    if reads_program_from_stdin(command.words):
        code += "\n" + "\n".join(r.body for r in command.redirects if r.op.startswith("<<"))
    code = code[:_MAX_CODE]
    if not _RUNS.search(code):
        return []
    lines = [" ".join(item for _, item in _ITEM.findall(m[1])) for m in _LIST.finditer(code)]
    for match in _STRING.finditer(code):
        text = next((g for g in match.groups() if g is not None), "")
        if " " in text.strip() or text.strip() in ("reboot", "shutdown"):
            lines.append(text)
    unique = [line.strip() for line in dict.fromkeys(lines) if line.strip()]
    return unique[:_MAX_LINES]


_RUNNERS = frozenset(
    {"setsid", "ionice", "taskset", "chrt", "strace", "ltrace", "valgrind", "chroot", "nsenter"}
    | {"unshare", "flock", "systemd-run", "proxychains", "proxychains4", "torsocks", "firejail"}
    | {"faketime", "fakeroot", "sg", "runuser", "daemonize", "unbuffer", "rlwrap", "tini"}
    | {"dumb-init", "catchsegv", "dbus-run-session", "chpst", "setpriv", "numactl", "cgexec"}
    | {"script", "scl", "nix-shell", "conda", "poetry", "pipenv", "uv", "npx", "pnpx", "bunx"}
)
_SSH_VALUE = frozenset("bcDEeFIiJLlmOoPpQRSWw")
_MAX_STARTS = 8


def _carried(command: SimpleCommand) -> list[tuple[str, str]]:
    name, words = command.name, command.words
    if name == "ssh":
        return _ssh(words)
    if name == "env":
        split = [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-S", "--split-string")]
        return [(line, "a command env -S runs") for line in split]
    if name in ("kubectl", "oc") and "exec" in words and "--" in words:
        remote = words[words.index("--") + 1 :]
        return [(_join(remote), f"a command {name} exec runs in a pod")] if remote else []
    if name in ("docker", "podman", "nerdctl") and "exec" in words:
        return _starts(words[words.index("exec") + 1 :], f"a command {name} exec runs", 1)
    if name == "parallel":
        end = words.index(":::") if ":::" in words else len(words)
        return _starts(words[1:end], "a command parallel runs", 0)
    if name in _RUNNERS:
        return _starts(words[1:], f"a command {name} runs", 0)
    return []


def _ssh(words: Sequence[str]) -> list[tuple[str, str]]:
    """`ssh [options] host command...`: the remote shell parses the words joined by spaces."""
    i = 1
    while i < len(words) and words[i].startswith("-") and words[i] != "--":
        option = words[i]
        i += 2 if len(option) == 2 and option[1] in _SSH_VALUE else 1
    i += words[i : i + 1] == ["--"]
    if i + 1 >= len(words):
        return []
    return [(" ".join(words[i + 1 :]), f"a command ssh runs on {words[i]}")]


def _starts(args: Sequence[str], how: str, skip: int) -> list[tuple[str, str]]:
    """Each way to read `args` as `[options and their values] command...`: every word that is
    not an option may be where the command starts (after `skip` more such words)."""
    out = []
    for i, word in enumerate(args):
        if word.startswith("-"):
            continue
        if skip:
            skip -= 1
            continue
        out.append((_join(args[i:]), how))
        if len(out) >= _MAX_STARTS:
            break
    return out


def _join(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)
