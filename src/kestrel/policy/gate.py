"""Whether a tool call may run: rules, then hooks, then the classifier, then the mode.

The order, and what each step can do:

1. **Rules** (`allow`/`ask`/`deny` lists): a deny ends it; plan mode then refuses anything that
   is not a read.
2. **PreToolUse hooks**: a deny (or a hook that crashed or timed out) ends it; a hook may rewrite
   the call's input, after which the rules are checked again on what will really run.
3. **Concerns** ask whatever the mode, bypass included: an irreversible or dangerous action, a
   write outside the workspace or to CI and git hook files, and, after a tool result that held
   instructions aimed at the agent, any command no rule allows. Outside bypass, shell constructs
   that rules cannot see through (`$(...)`, `eval`, `sh -c`, heredocs, pipes into interpreters)
   ask too, as do options that run code or write files (`git log --output`, `npm run`, `find
   -exec`) that the allow rule does not name. A line the parser could not read with certainty
   asks in every mode. An exact allow rule naming the command or path silences its concern.
4. An `ask` rule or hook asks; an `allow` rule or hook allows; otherwise the mode decides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from kestrel.policy.classify import classify_paths, classify_shell
from kestrel.policy.gate_checks import (
    SANDBOX_PRIVATE,
    command_parts,
    hidden,
    outside,
    unusual,
)
from kestrel.policy.hooks import HookRunner, HookVerdict
from kestrel.policy.modes import decide
from kestrel.policy.rules import RuleSet, RuleVerdict
from kestrel.policy.shell import ShellParse, parse_shell
from kestrel.policy.subject import CallSubject
from kestrel.protocol.events import PermissionMode

Verdict = Literal["allow", "ask", "deny"]
DecidedBy = Literal["mode", "rule", "hook", "classifier"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GateDecision:
    """The gate's verdict on one call, who gave it, and why."""

    verdict: Verdict
    decided_by: DecidedBy
    reason: str
    source: str = ""
    """The rule (with its file) or hook command that decided."""
    subject: CallSubject
    """The call as it will run: a hook may have changed its arguments."""
    updated: bool = False
    """True when a hook replaced the call's arguments."""
    hooks: HookVerdict | None = None


HookInput = tuple[str, Mapping[str, Any]]
"""The tool's name and input as hooks see them (Claude Code's names where there are some)."""


@dataclass(frozen=True, slots=True)
class PermissionGate:
    """Decides tool calls from settings' rules and hooks; built once per session."""

    rules: RuleSet = field(default_factory=RuleSet)
    hooks: HookRunner | None = None
    dirty: Callable[[], bool] | None = None
    """Whether the workspace holds uncommitted work (for `git reset --hard` and the like)."""
    sandboxed: bool = True
    """False when commands run unconfined: then every command asks unless a rule allows it."""

    async def check(
        self,
        subject: CallSubject,
        mode: PermissionMode,
        *,
        tainted: bool = False,
        call_id: str = "",
        hook_input: HookInput | None = None,
        from_hook_input: Callable[[Mapping[str, Any]], CallSubject] | None = None,
    ) -> GateDecision:
        """The verdict for one call in `mode`; `tainted` after a flagged tool result."""
        if subject.kind is None:
            return _decision("allow", "mode", "unknown tool: dispatch reports the error", subject)
        parsed = _parse(subject)
        ruled = self._evaluate(subject, parsed)
        if ruled.verdict == "deny":
            return _decision("deny", "rule", ruled.reason, subject, ruled)
        if mode == "plan" and subject.kind != "read":
            return _decision("deny", "mode", decide(mode, subject.kind).reason, subject)
        hooked = None
        if self.hooks is not None and hook_input is not None:
            hooked = await self._run_hooks(subject, call_id, hook_input)
            if hooked.decision == "deny":
                return _hook_decision("deny", hooked, subject)
            if hooked.updated_input is not None and from_hook_input is not None:
                try:
                    subject = replace(from_hook_input(hooked.updated_input), root=subject.root)
                except ValueError as exc:
                    reason = f"a PreToolUse hook rewrote the call into one that is not valid: {exc}"
                    return _decision("deny", "hook", reason, subject, hooks=hooked)
                parsed = _parse(subject)
                ruled = self._evaluate(subject, parsed)
                if ruled.verdict == "deny":
                    return _decision("deny", "rule", ruled.reason, subject, ruled, hooked)
        updated = hooked is not None and hooked.updated_input is not None
        concerns = self._concerns(subject, parsed, ruled, mode, tainted=tainted)
        if concerns:
            reason = "; ".join(dict.fromkeys(concerns))
            return _decision("ask", "classifier", reason, subject, hooks=hooked, updated=updated)
        if ruled.verdict == "ask":
            return _decision("ask", "rule", ruled.reason, subject, ruled, hooked, updated)
        if hooked is not None and hooked.decision == "ask":
            return _hook_decision("ask", hooked, subject, updated)
        if ruled.verdict == "allow":
            return _decision("allow", "rule", ruled.reason, subject, ruled, hooked, updated)
        if hooked is not None and hooked.decision == "allow":
            return _hook_decision("allow", hooked, subject, updated)
        by_mode = decide(mode, subject.kind)
        if by_mode.verdict == "allow" and subject.kind == "execute" and not self.sandboxed:
            reason = "commands run without a sandbox (--sandbox none), so each one is asked about"
            return _decision("ask", "mode", reason, subject, hooks=hooked, updated=updated)
        return _decision(by_mode.verdict, "mode", by_mode.reason, subject, None, hooked, updated)

    def _evaluate(self, subject: CallSubject, parsed: ShellParse | None) -> RuleVerdict:
        parts = command_parts(parsed)
        ruled = self.rules.evaluate(subject, parts)
        if ruled.verdict != "deny" and parts:
            hit = self.rules.denied_argument(subject, parts)
            if hit is not None:
                reason = f"rule {hit.rule.describe()} denies reading a file `{hit.part}` names"
                return RuleVerdict(verdict="deny", hit=hit, reason=reason)
        return ruled

    async def _run_hooks(
        self, subject: CallSubject, call_id: str, hook_input: HookInput
    ) -> HookVerdict:
        assert self.hooks is not None
        name, tool_input = hook_input
        payload = {"tool_name": name, "tool_input": dict(tool_input), "tool_use_id": call_id}
        names = {name, subject.tool, *subject.aliases}
        return await self.hooks.run("PreToolUse", payload, tool_names=names)

    def _concerns(
        self,
        subject: CallSubject,
        parsed: ShellParse | None,
        ruled: RuleVerdict,
        mode: PermissionMode,
        *,
        tainted: bool,
    ) -> list[str]:
        """Reasons to ask about this call whatever the rules and the mode say."""
        exact = ruled.exactly_allowed
        concerns: list[str] = []
        if parsed is not None:
            root = subject.root
            dangers = classify_shell(parsed, root=root, cwd=root, dirty=self._dirty)
            concerns += [d.reason for d in dangers if d.command not in exact]
            whole_exact = parsed.source.strip() in exact
            # A line the parser could not read with certainty is asked about in every mode.
            concerns += hidden(parsed, ruled, whole_exact=whole_exact, only_unread=mode == "bypass")
            if mode != "bypass" and not whole_exact:
                concerns += unusual(parsed, command_parts(parsed), ruled)
            if not whole_exact:
                private = SANDBOX_PRIVATE if self.sandboxed else ()
                concerns += outside(parsed, root, self.rules.home, private)
            if tainted and ruled.verdict != "allow":
                concerns.append(
                    "a tool result earlier in this session held instructions aimed at the "
                    "agent, so commands no rule allows are asked about"
                )
        if subject.kind == "edit" and subject.paths:
            dangers = classify_paths(subject.paths, root=subject.root)
            concerns += [d.reason for d in dangers if d.command not in exact]
        return concerns

    def _dirty(self) -> bool:
        # Unknown means dirty: a reset might destroy work.
        return True if self.dirty is None else self.dirty()


def _parse(subject: CallSubject) -> ShellParse | None:
    return None if subject.command is None else parse_shell(subject.command)


def _decision(
    verdict: Verdict,
    by: DecidedBy,
    reason: str,
    subject: CallSubject,
    ruled: RuleVerdict | None = None,
    hooks: HookVerdict | None = None,
    updated: bool = False,
) -> GateDecision:
    source = ruled.hit.rule.describe() if ruled is not None and ruled.hit is not None else ""
    return GateDecision(
        verdict=verdict,
        decided_by=by,
        reason=reason,
        source=source,
        subject=subject,
        updated=updated,
        hooks=hooks,
    )


def _hook_decision(
    verdict: Verdict, hooked: HookVerdict, subject: CallSubject, updated: bool = False
) -> GateDecision:
    commands = [r.command for r in hooked.results]
    reason = hooked.reason or f"a PreToolUse hook answered {verdict}"
    return GateDecision(
        verdict=verdict,
        decided_by="hook",
        reason=reason,
        source="; ".join(commands),
        subject=subject,
        updated=updated,
        hooks=hooked,
    )
