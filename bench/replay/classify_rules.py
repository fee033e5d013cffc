"""Why a replay's tree differs from the recorded one: pure rules over one result line.

Classes, in the order they are decided:
  harness-error           the replay could not be set up (no base commit, no trajectory ...)
  early-stop:<reason>     the session ended before the script did (loop, max_turns, verification,
                          error, budget, timeout ...), whatever the tree; `verification` also
                          when a blocking verification asked for turns the recording lacks
  identical               the tree is the recorded one
  identical-modulo-env    it differs only in files the original environment had changed before
                          the run and that no command touched
  refused                 a command was denied (rule, classifier, hook)
  sandbox                 a differing file comes from a step that failed here for a sandbox reason
  environment             ... from a step that failed here for a reason of the machine: missing
                          Python packages, another interpreter, unbuilt extensions, a program or
                          a blob the machine lacks
  kestrel-defect          anything else: a difference nothing above explains
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

CLASSES = (
    "harness-error",
    "early-stop",
    "identical",
    "identical-modulo-env",
    "refused",
    "sandbox",
    "environment",
    "kestrel-defect",
)
NOT_RUN = {"harness_error", "no_base_commit", "expected_patch_does_not_apply", "base_mismatch"}

# (cause, label, pattern) in the order they are tried: a strong sandbox sign wins over an
# environment one, which wins over a weak sandbox sign (permission errors have other causes too).
MARKERS: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (cause, label, re.compile(pattern))
    for cause, label, pattern in (
        ("sandbox", "read-only file system", r"Read-only file system"),
        (
            "sandbox",
            "no network",
            r"Network is unreachable|Temporary failure in name resolution|Could not resolve host"
            r"|Name or service not known|Failed to establish a new connection"
            r"|No matching distribution found|Could not find a version that satisfies",
        ),
        (
            "sandbox",
            "a /tmp file missing",
            r"/tmp/\S*: No such file or directory|No such file or directory: '/tmp/"
            r"|can't open file '/tmp/",
        ),
        ("environment", "missing Python module", r"ModuleNotFoundError|No module named"),
        ("environment", "import failed", r"ImportError|cannot import name"),
        ("environment", "old code on this interpreter", r"SyntaxError|invalid escape sequence"),
        (
            "environment",
            "extension modules not built",
            r"broken installation|not been built|extension modules|build_ext|_ext'? not found",
        ),
        ("environment", "dependency version", r"AttributeError: module '[\w.]+' has no attribute"),
        (
            "environment",
            "test runner version",
            r"while parsing the following warning configuration|INTERNALERROR"
            r"|error: unrecognized arguments",
        ),
        ("environment", "the mirror lacks a blob", r"unable to read [0-9a-f]{40}|bad object"),
        ("environment", "program not installed", r"command not found"),
        (
            "consequence",
            "a file an earlier step did not make",
            r"No such file or directory|cannot access|can't read|cannot remove",
        ),
        ("sandbox", "permission denied", r"Permission denied|Operation not permitted"),
    )
)
_FAILURE_LINE = re.compile(
    r"(?m)^(?:[\w.]*(?:Error|Exception)\b|E\s+[\w.]*Error\b|fatal: |.*command not found"
    r"|.*Read-only file system|.*Network is unreachable)"
)
_NOISE = re.compile(r"^\s*$|^\s*[\^~]+\s*$|^\[exit code -?\d+\]")
_TRACEBACK_FILE = re.compile(r'File "([^"]+)", line \d+')
_WRITES = re.compile(r"(?:>>?|\btee(?:\s+-a)?)\s*['\"]?([\w./-]+)")


@dataclass(frozen=True, slots=True)
class Verdict:
    """A result's class and the evidence for it, one line per item."""

    instance_id: str
    cls: str
    evidence: list[str] = field(default_factory=list)

    @property
    def family(self) -> str:
        """The class without its reason (`early-stop:loop` -> `early-stop`)."""
        return self.cls.split(":", 1)[0]


def marker(text: str) -> tuple[str, str] | None:
    """The first known cause whose sign is in the text: (cause, label)."""
    for cause, label, pattern in MARKERS:
        if pattern.search(text):
            return cause, label
    return None


def output_differs(before: str, after: str) -> bool:
    """Whether a command's output here ends with a sandbox or environment failure that its
    original output did not show (a failure its exit code hides: `python x.py > out; echo ok`).

    Only the end of the output counts, and only a line that reports the failure (an exception
    at the start of a line, `E   ...Error` from pytest, `fatal:` ...): a file's text printed by
    `cat` that merely mentions ImportError is no failure."""
    end = after[-800:]
    now = marker(end)
    if now is None or now[0] not in ("sandbox", "environment"):
        return False
    return _FAILURE_LINE.search(end) is not None and marker(before) != now


def _diverged(result: dict[str, Any]) -> dict[int, dict[str, Any]]:
    steps = result.get("diverged_steps", result.get("rc_diverged_steps"))
    return {d["step"]: d for d in steps or []}


def cause_of(step: dict[str, Any]) -> tuple[str, str]:
    """Why a diverged step failed here: (sandbox | environment | consequence | unexplained, label).

    `consequence`: it misses a file, which an earlier diverged step may have failed to make."""
    found = marker(f"{step.get('head', '')}\n{step.get('tail', '')}")
    if found is not None:
        if found[1] == "program not installed" and step.get("host_has_program"):
            return "sandbox", "program hidden by the sandbox"
        if found[1] == "old code on this interpreter" and step.get("own_script"):
            return "unexplained", f"{step['own_script']}, which a replayed command wrote, fails"
        return found
    if step.get("interrupted") or step.get("replay_rc") is None:
        return "unexplained", "interrupted or timed out"
    return "unexplained", "no known cause in its output"


def mark_own_scripts(diverged: list[dict[str, Any]], commands: list[str]) -> None:
    """Note on each step failing with a SyntaxError in a file that a replayed command wrote
    (`own_script`): old code on a new interpreter does not explain that; a mangled heredoc would."""
    written = {os.path.basename(t) for c in commands for t in _WRITES.findall(c)}
    for d in diverged:
        text = f"{d.get('head', '')}\n{d.get('tail', '')}"
        if "SyntaxError" not in text:
            continue
        files = _TRACEBACK_FILE.findall(text[: text.rfind("SyntaxError")])
        if files and os.path.basename(files[-1]) in written:
            d["own_script"] = os.path.basename(files[-1])


def producers(path: str, commands: list[str]) -> list[int]:
    """Steps that may have produced `path`: those naming it, and those running a file that a
    step naming it wrote (a script written by a heredoc, then run)."""
    names = {os.path.basename(path)}
    for _ in range(2):
        naming = [i for i, c in enumerate(commands) if any(n in c for n in names)]
        written = {os.path.basename(t) for i in naming for t in _WRITES.findall(commands[i])}
        names |= {w for w in written if w and w not in (".", "..")}
    return [i for i, c in enumerate(commands) if any(n in c for n in names)]


def _last_lines(step: dict[str, Any], n: int = 2) -> str:
    """The last telling lines of a step's output: no caret markers, no exit code notes."""
    text = str(step.get("tail") or step.get("head") or "")
    lines = [ln.strip() for ln in text.splitlines() if not _NOISE.match(ln)]
    return " | ".join(lines[-n:])[:300]


def _early_stop(result: dict[str, Any]) -> str | None:
    finish = result.get("finish") or {}
    reason = finish.get("reason")
    if reason == "done":
        ran, total = result.get("steps_ran", 0), result.get("n_steps", 0)
        return None if ran >= total else "incomplete"
    if reason is None:
        return "timeout" if result.get("kestrel_rc") == "timeout" else "no-finish"
    if reason == "budget":
        return "max_turns" if str(finish.get("detail", "")).startswith("turns") else "budget"
    if reason == "error" and _asked_past_script(result):
        return "verification"
    return "verification" if reason == "unverified" else str(reason)


def _asked_past_script(result: dict[str, Any]) -> bool:
    """Whether the session ended because a blocking verification asked the model for more
    turns than the recording has (the scripted model then has no reply left)."""
    detail = str((result.get("finish") or {}).get("detail", ""))
    blocked = any(v.get("blocking") and not v.get("ok") for v in result.get("verify") or [])
    return blocked and detail.startswith("ScriptExhausted")


def _inherited(
    found: tuple[str, str], step: dict[str, Any], diverged: dict[int, dict[str, Any]]
) -> tuple[str, str]:
    """A consequence takes the cause of the earlier diverged steps (the sandbox's first), else
    it is unexplained."""
    if found[0] != "consequence":
        return found
    earlier = [(cause_of(d), k) for k, d in sorted(diverged.items()) if k < step["step"]]
    for cls in ("sandbox", "environment"):
        first = next((k for (cause, _), k in earlier if cause == cls), None)
        if first is not None:
            return cls, f"{found[1]}; follows step {first}, which failed for the {cls}"
    return "unexplained", found[1]


def step_causes(result: dict[str, Any]) -> list[tuple[dict[str, Any], str, str]]:
    """Every diverged step of a result with its cause and label, consequences resolved."""
    diverged = _diverged(result)
    return [(d, *_inherited(cause_of(d), d, diverged)) for d in diverged.values()]


def _explain_path(path: str, result: dict[str, Any]) -> tuple[str, list[str]]:
    diverged = _diverged(result)
    candidates = [
        diverged[i] for i in (result.get("path_producers") or {}).get(path, []) if i in diverged
    ]
    if not candidates:
        return "kestrel-defect", [f"{path}: differs, and every step that names it ran as before"]
    found = [(_inherited(cause_of(d), d, diverged), d) for d in candidates]
    evidence = [
        f"{path}: step {d['step']} `{d['command'][:80]}` rc {d['orig_rc']} -> {d['replay_rc']}"
        f"{' (its output differs)' if d.get('why') == 'output' else ''} "
        f"[{cause}: {label}] {_last_lines(d)}"
        for (cause, label), d in found
    ]
    causes = {cause for (cause, _), _ in found}
    for cls in ("sandbox", "environment"):
        if cls in causes:
            return cls, evidence
    return "kestrel-defect", evidence


def _stop_evidence(result: dict[str, Any]) -> list[str]:
    finish = result.get("finish") or {}
    ran = f"{result.get('steps_ran')} of {result.get('n_steps')} steps ran"
    lines = [f"{ran}; finish {finish.get('reason')}: {finish.get('detail', '')}"[:300]]
    lines += [f"loop {e.get('action')}: {e.get('detail')}"[:300] for e in result.get("loop", [])]
    for v in result.get("verify") or []:
        if v.get("blocking") and not v.get("ok"):
            report = " | ".join(str(v.get("report") or "").splitlines()[:6])
            lines.append(f"blocking verification round {v.get('round')}: {report}"[:400])
    return lines + [str(e)[:300] for e in result.get("errors") or []][:3]


def classify(result: dict[str, Any]) -> Verdict:
    """The class of one result line (see the module's docstring)."""
    iid = str(result.get("instance_id"))
    status = result.get("status")
    if status in NOT_RUN or status is None:
        return Verdict(iid, "harness-error", [f"{status}: {result.get('error', '')}"[:300]])
    stop = _early_stop(result)
    if stop is not None:
        return Verdict(iid, f"early-stop:{stop}", _stop_evidence(result))
    if result.get("stdout_utf8") is False:
        return Verdict(iid, "kestrel-defect", ["Kestrel's stream-json output is not valid UTF-8"])
    if status == "identical":
        return Verdict(iid, "identical")
    pre = set(result.get("env_preexisting_paths") or [])
    paths = [p for _, p in result.get("mismatch_paths") or []]
    rest = [p for p in paths if p not in pre]
    env_lines = [f"{p}: changed before the original run; no command touches it" for p in pre]
    if not rest:
        return Verdict(iid, "identical-modulo-env", env_lines)
    if result.get("denied"):
        lines = [
            f"{d.get('call_id')} denied by {d.get('decided_by')}: {d.get('reason')}"[:300]
            for d in result["denied"]
        ]
        return Verdict(iid, "refused", lines)
    worst, evidence = "environment", []
    order = ("environment", "sandbox", "kestrel-defect")
    for path in rest:
        cls, lines = _explain_path(path, result)
        evidence += lines
        worst = max(worst, cls, key=order.index)
    return Verdict(iid, worst, evidence + env_lines)
