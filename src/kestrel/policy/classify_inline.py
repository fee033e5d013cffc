"""Shell commands inside inline program code: `python -c "os.system('kubectl delete ns x')"`,
`node -e "execSync('rm -rf ~/.ssh')"`, a `python3 - <<EOF` heredoc that calls `subprocess.run`.
The classifier reads them as command lines of their own, so bypass mode does not let an
interpreter carry what it would ask about when written plainly."""

from __future__ import annotations

import re

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


def embedded_commands(command: SimpleCommand) -> list[str]:
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
    return [line.strip() for line in dict.fromkeys(lines) if line.strip()]
