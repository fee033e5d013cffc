"""Turn one recorded mini-swe-agent trajectory (`*.traj.json`) into a Kestrel scripted-model script.

Each assistant message holding exactly one ```bash block (mini-swe-agent's own rule) becomes one
scripted turn that calls Kestrel's `bash` tool with that command, verbatim, and the original
environment's 60 s timeout. Messages with zero or several blocks were format errors: they ran
nothing, so they become no turn. The submission step (a command that printed
COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT and ended the run) becomes the script's final text answer;
what that command ran before echoing the token (a clean-up such as `rm -rf reproduction`) is
replayed as one more step, since the original ran it too. See docs/scripted-model.md for the
script format.

    python bench/replay/convert.py TRAJ.json SCRIPT_OUT.json [--meta META_OUT.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ACTION_RE = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
SUBMIT_TOKENS = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
RETURNCODE_RE = re.compile(r"^\s*<returncode>(-?\d+)</returncode>")
TIMEOUT_S = 60  # the original environment's command timeout
MAX_TEXT = 2000  # thought text kept per turn: it is streamed, and changes nothing
OUTPUT_HEAD, OUTPUT_TAIL = 400, 800  # characters kept of each original output (its start, end)


class ConvertError(ValueError):
    """The file is not a trajectory this converter understands."""


@dataclass(frozen=True, slots=True)
class Step:
    """One replayed command and what it did in the original run."""

    index: int
    command: str
    orig_returncode: int | None
    orig_output_head: str
    orig_output_tail: str


@dataclass(slots=True)
class Conversion:
    """A script for the scripted model, and what the harness needs to judge the replay."""

    instance_id: str
    task: str
    script: list[dict[str, Any]] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    format_errors: int = 0
    submitted: bool = False
    exit_status: str = ""
    submission: str = ""

    def meta(self) -> dict[str, Any]:
        """Everything but the script, as plain JSON."""
        return {
            "instance_id": self.instance_id,
            "task": self.task,
            "n_steps": len(self.steps),
            "format_errors": self.format_errors,
            "submitted": self.submitted,
            "exit_status": self.exit_status,
            "submission": self.submission,
            "steps": [
                {
                    "index": s.index,
                    "command": s.command,
                    "orig_returncode": s.orig_returncode,
                    "orig_output_head": s.orig_output_head,
                    "orig_output_tail": s.orig_output_tail,
                }
                for s in self.steps
            ],
        }


def _messages(traj: object) -> list[dict[str, str]]:
    if not isinstance(traj, dict):
        raise ConvertError("a trajectory is a JSON object with a 'messages' list")
    messages = traj.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ConvertError("the trajectory has no 'messages' list")
    out = []
    for n, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ConvertError(f"message {n} has no 'role'")
        content = m.get("content")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        out.append({"role": m["role"], "content": content if isinstance(content, str) else ""})
    return out


def task_text(messages: list[dict[str, str]]) -> str:
    """The issue the original agent was given (inside <pr_description>), else its first prompt."""
    first = next((m["content"] for m in messages if m["role"] == "user"), "")
    found = re.search(r"<pr_description>(.*?)</pr_description>", first, re.DOTALL)
    text = found.group(1) if found else first
    return text.replace("Consider the following PR description:", "", 1).strip()


def _is_submission(command: str, observation: str | None) -> bool:
    """A submit command that ended the run: nothing followed it, or no ordinary observation did."""
    if not any(token in command for token in SUBMIT_TOKENS):
        return False
    return observation is None or RETURNCODE_RE.match(observation) is None


def convert(traj: object) -> Conversion:
    """The scripted-model script and step list of one trajectory."""
    messages = _messages(traj)
    info = traj.get("info") if isinstance(traj, dict) else None
    info = info if isinstance(info, dict) else {}
    raw_id = traj.get("instance_id") if isinstance(traj, dict) else None
    conv = Conversion(
        instance_id=str(raw_id or ""),
        task=task_text(messages),
        exit_status=str(info.get("exit_status") or ""),
        submission=str(info.get("submission") or ""),
    )
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        blocks = ACTION_RE.findall(m["content"])
        if len(blocks) != 1:
            conv.format_errors += 1
            continue
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        observation = nxt["content"] if nxt is not None and nxt["role"] != "assistant" else None
        command = blocks[0].strip()
        thought = m["content"][: m["content"].find("```bash")].strip()[:MAX_TEXT]
        if _is_submission(command, observation):
            conv.submitted = True
            if before := submission_prefix(command):
                # What the submit command did before it printed the token ran too (a clean-up,
                # say): it is one more step, its original exit code unknown.
                _add_step(conv, before, None, "", thought)
                thought = ""
            conv.script.append({"text": thought or "Done."})
            return conv
        found = RETURNCODE_RE.match(observation or "")
        _add_step(conv, command, int(found.group(1)) if found else None, observation or "", thought)
    ended = conv.exit_status or "no submission"
    conv.script.append({"text": f"The recorded run ended without submitting ({ended})."})
    return conv


_TOKENS = "|".join(SUBMIT_TOKENS)
_SUBMIT_ECHO = re.compile(rf"(?:^|&&|;|\n)\s*echo\s+[\"']?(?:{_TOKENS})")


def submission_prefix(command: str) -> str:
    """The commands a submit command ran before echoing the token (`rm -rf tmp` in `rm -rf tmp
    && echo COMPLETE_... && git add -A`), or "" when it begins with the echo."""
    found = _SUBMIT_ECHO.search(command)
    if found is None:
        return ""
    return command[: found.start()].strip().rstrip("&;").strip()


def _add_step(
    conv: Conversion, command: str, returncode: int | None, observation: str, thought: str
) -> None:
    """One replayed `bash` call, and what the original run saw from it."""
    conv.steps.append(
        Step(
            index=len(conv.steps),
            command=command,
            orig_returncode=returncode,
            orig_output_head=observation[:OUTPUT_HEAD],
            orig_output_tail=observation[OUTPUT_HEAD:][-OUTPUT_TAIL:],
        )
    )
    turn: dict[str, Any] = {
        "tool_calls": [{"name": "bash", "arguments": {"command": command, "timeout": TIMEOUT_S}}]
    }
    if thought:
        turn["text"] = thought
    conv.script.append(turn)


def main(argv: list[str] | None = None) -> int:
    """Convert one file; a file that is not a trajectory is a one-line error."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traj", type=Path)
    ap.add_argument("script_out", type=Path)
    ap.add_argument("--meta", type=Path, help="also write the steps and the submission here")
    a = ap.parse_args(argv)
    try:
        conv = convert(json.loads(a.traj.read_text()))
    except (OSError, ValueError) as e:  # ConvertError and JSON errors are ValueErrors
        print(f"convert.py: {a.traj}: {e}", file=sys.stderr)
        return 2
    a.script_out.write_text(json.dumps(conv.script, indent=1))
    if a.meta:
        a.meta.write_text(json.dumps(conv.meta(), indent=1))
    print(
        f"{conv.instance_id or a.traj.name}: {len(conv.steps)} command turns, "
        f"{conv.format_errors} format errors skipped, submitted={conv.submitted}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
