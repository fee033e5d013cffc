"""The agent loop: ask the model, run the tools it calls, repeat until it stops calling them.

Every step is an event appended to the session's log before anything depends on it; the loop's
picture of the session is the fold of that log (`state.replay`), so a resumed session continues
exactly where the log says it stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from kestrel.agent import budget_notices, budgets, model_step, prompt_hooks, turn_budget, window
from kestrel.agent.cancel_rollback import settle_cancelled
from kestrel.agent.cut_replies import CutReplies
from kestrel.agent.daily import DailyBudget
from kestrel.agent.first_context import CodeSearch
from kestrel.agent.loops import LoopDetector, signature
from kestrel.agent.planning import proposed_in
from kestrel.agent.ports import (
    Approver,
    Checkpointer,
    ModelStreamer,
    OnRetry,
    OnSwitch,
    ToolEnvironment,
    Verifier,
)
from kestrel.agent.recovery import LoopRecovery
from kestrel.agent.rollback import logged_final_answer
from kestrel.agent.routing import Step, role_for
from kestrel.agent.state import SessionState, apply, replay, wall_seconds
from kestrel.agent.tool_runner import ToolRunner, hook_events
from kestrel.policy.gate import PermissionGate
from kestrel.policy.hooks import HookEvent, HookRunner, HookVerdict
from kestrel.protocol.errors import ProviderError
from kestrel.protocol.events import (
    ContextAdded,
    ErrorOccurred,
    Event,
    FinishReason,
    Limits,
    LoopDetected,
    ModelCompleted,
    ModelRole,
    PermissionMode,
    Record,
    SessionFinished,
    Totals,
    UserMessage,
)
from kestrel.protocol.messages import (
    ToolCall,
    ToolResultTurn,
    Usage,
)
from kestrel.store.base import EventStore
from kestrel.tools.registry import ToolRegistry

MAX_STOP_BLOCKS = 5
"""How many times in a row Stop hooks may send the model back to work before it may stop."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopConfig:
    """What the loop needs besides its collaborators."""

    system_prompt: str
    max_output_tokens: int = 8192
    warn_after: int = 3
    stop_after: int = 5
    permission_mode: PermissionMode | None = None
    """Overrides the mode the session started with (a resume may change it)."""
    limits: Limits | None = None
    """Overrides the budgets the session started with (a resume may raise them)."""
    model: str | None = None
    """The model in use, when a resume chose another than the session started with."""
    max_verify_rounds: int = 3
    """Failed verifications in a row the model gets to fix before the session stops."""
    role_models: Mapping[ModelRole, str] = field(default_factory=dict)
    """The model each role asks first, for the log; a role missing here logs `model`."""
    role: ModelRole | None = None
    """Answers every turn with this role's models instead of the routing rule's (a subagent's)."""
    oscillate_after: int = 4
    """Failing results alternating between two states before the loop is undone (once)."""
    context_window: int | None = None
    """Tokens the model's context window holds; None: never compact."""
    compact_at: float = 0.8
    """Compact when a request would fill this share of the window (less the output's room)."""
    keep_share: float = 0.3
    """The share of the window that the newest turns may keep, word for word, in a compaction."""
    move_outputs_over: int = 10_000
    """Tool outputs longer than this (characters) in kept turns are moved to files."""
    turn_grace: float = 0.0
    """The share of the turn budget a run still changing files may go past it by, once."""
    reach_outside: str = ""
    """What commands can reach outside the workspace, named when a stop rolls one back."""
    first_context_files: int = 0
    """Files of the engine's ranking for the task added before the first turn; 0: none."""
    rerank_candidates: int = 0
    """How many of them the fast model reorders first; 0 or 1: no model call."""


@dataclass(frozen=True, slots=True)
class _Verified:
    """A failed verification: `reason` is None while the model may still fix it."""

    reason: str | None


@dataclass(slots=True)
class AgentLoop:
    """Runs one session from wherever its log stands until it finishes."""

    store: EventStore
    session_id: str
    streamer: ModelStreamer
    tools: ToolRegistry
    environment: ToolEnvironment
    approver: Approver
    config: LoopConfig
    clock: Callable[[], float] = time.time
    checkpointer: Checkpointer | None = None
    verifier: Verifier | None = None
    """Checks the change when the model is done; None: no automatic verification."""
    gate: PermissionGate = field(default_factory=PermissionGate)
    """Permission rules, hooks and the classifier; by default only the mode decides."""
    daily: DailyBudget | None = None
    """Budgets over every session of the day; None: no daily budget."""
    output_store: Callable[[ToolResultTurn], str] | None = None
    """Writes a tool output to a file and says where, for compaction; None: outputs stay."""
    code_search: CodeSearch | None = None
    """Ranks the workspace for the task's first context; None: no first context."""
    state: SessionState = field(init=False)
    read_hashes: dict[str, str] = field(init=False, default_factory=dict)
    """What each file held when the model last read it, for refusing edits of stale reads."""
    _session_hooks_ran: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.state = replay(self.store.read(self.session_id))

    def _watch_for_loops(self) -> LoopDetector:
        """A detector that has already seen the calls the conversation holds."""
        detector = LoopDetector(self.config.warn_after, self.config.stop_after)
        for call_id, result in self.state.results.items():
            if call_id in self.state.calls:
                detector.observe(self._fingerprint(self.state.calls[call_id], result.content))
        return detector

    def _fingerprint(self, call: ToolCall, content: str) -> str:
        """A call, its result and the files it ran on: the same call and result on changed
        files is not a repeat."""
        files = self.state.marks.result_files.get(call.id, "")
        return signature(call, f"{files}\0{content}")

    def emit(self, event: Event) -> Record:
        """Append `event` durably, then fold it into the loop's state."""
        record = self.store.append(self.session_id, event)
        apply(self.state, record)
        return record

    async def send(self, text: str) -> SessionFinished:
        """Add a message from the person and run until the session finishes again."""
        self.emit(UserMessage(text=text))
        return await self.run()

    async def run(self) -> SessionFinished:
        """Step until the model stops calling tools, a limit is hit, or the run is cancelled."""
        finished = await self._run()
        if finished.reason != "cancelled":
            await self._hook("SessionEnd", {"reason": finished.reason})
        return finished

    async def _run(self) -> SessionFinished:
        detector = self._watch_for_loops()
        recovery = LoopRecovery(
            self.state, self.emit, self.checkpointer, self.config.oscillate_after
        )
        mode = self.config.permission_mode or self.state.permission_mode
        runner = ToolRunner(
            self.emit,
            self.state,
            self.tools,
            self.environment,
            self.approver,
            mode,
            self.checkpointer,
            self.read_hashes,
            self.gate,
        )
        stop_continues = 0
        cut = CutReplies(self.config.max_output_tokens)
        try:
            if (stopped := await self._prompt_hooks()) is not None:
                return stopped
            self._note_budgets()
            answered = logged_final_answer(self.store, self.state)  # A resume after the answer.
            while self.state.finished is None:
                if self.state.pending:
                    finished = await runner.run_calls(list(self.state.pending))
                    if (stop := self._after_tools(finished, detector)) is not None:
                        return self._finish(*stop)
                    recovered = self.state.marks.recoveries
                    if (stop := await recovery.check(finished)) is not None:
                        return self._finish(*stop)
                    if self.state.marks.recoveries != recovered:
                        detector = self._watch_for_loops()  # The loop's calls are undone.
                    continue
                if (spent := self._exceeded()) is not None:
                    return self._finish("budget", spent.detail)
                if (stopped := await self._fit_window()) is not None:
                    return stopped
                completion = answered or await self._model_step()
                answered = None
                self._warn_budgets()
                if (cut_short := cut.check(completion)) is not None:
                    if isinstance(cut_short, str):
                        return self._finish("error", cut_short)
                    self.emit(cut_short)
                    continue
                if not completion.message.tool_calls:
                    if (verified := await self._verify()) is not None:
                        if verified.reason is None:
                            continue
                        return self._finish("unverified", verified.reason)
                    verdict = await self._hook("Stop", {"stop_hook_active": stop_continues > 0})
                    if verdict is not None and verdict.stop_session:
                        return self._finish("hook", window.stopped_by(verdict))
                    if verdict is not None and verdict.block and stop_continues < MAX_STOP_BLOCKS:
                        stop_continues += 1
                        reason = verdict.reason or "a Stop hook asked to keep going"
                        self.emit(ContextAdded(source="Stop hook", text=reason))
                        continue
                    return self._finish("done", "", completion.message.text)
        except asyncio.CancelledError as exc:
            # Whoever cancels may say why (`task.cancel("stopped by SIGTERM")`); else the user did.
            why = str(exc.args[0]) if exc.args and exc.args[0] else "cancelled by the user"
            left = await settle_cancelled(
                self.state,
                self.emit,
                self.checkpointer,
                self.tools.kind,
                why=why,
                outside=self.config.reach_outside,
            )
            runner.interrupt_unfinished(why, keep=left)
            self._finish("cancelled", why)
            raise
        except ProviderError as exc:
            self.emit(ErrorOccurred(error_kind=type(exc).__name__, message=str(exc)))
            return self._finish("error", f"{type(exc).__name__}: {exc}")
        assert self.state.finished is not None
        return self.state.finished

    async def _prompt_hooks(self) -> SessionFinished | None:
        return await prompt_hooks.run(self)

    async def _hook(self, event: HookEvent, payload: dict[str, object]) -> HookVerdict | None:
        """Run the hooks configured for `event`, logging each; `None` when there are none."""
        hooks: HookRunner | None = self.gate.hooks
        if hooks is None or not hooks.matching(event):
            return None
        verdict = await hooks.run(event, payload)
        for ran in hook_events(verdict):
            self.emit(ran)
        return verdict

    def _role(self) -> ModelRole:
        if self.config.role is not None:
            return self.config.role
        mode = self.config.permission_mode or self.state.permission_mode
        fixing = self.state.failed_verifications > 0
        return role_for(Step(kind="turn", permission_mode=mode, fixing=fixing))

    def _reporters(self, request_id: str, role: ModelRole) -> tuple[OnRetry, OnSwitch]:
        """Callbacks that log the request's retries and its moves to another model."""
        return model_step.reporters(self.emit, request_id, role)

    async def _model_step(self) -> ModelCompleted:
        return await model_step.take(self)

    async def _fit_window(self) -> SessionFinished | None:
        """Compact the conversation when the next request would fill the context window."""
        return await window.fit(self)

    def _after_tools(
        self, finished: list[tuple[ToolCall, str]], detector: LoopDetector
    ) -> tuple[FinishReason, str] | None:
        """Loop detection over the calls just finished, budget warnings, then a stop when
        one of the calls proposed a plan (the person decides on it before anything else)."""
        stop: tuple[FinishReason, str] | None = None
        for call, content in finished:
            verdict = detector.observe(self._fingerprint(call, content))
            if verdict is not None and stop is None:
                self.emit(
                    LoopDetected(
                        pattern=verdict.pattern, action=verdict.action, detail=verdict.detail
                    )
                )
                if verdict.action == "stop":
                    stop = ("loop", verdict.detail)
        self._warn_budgets(daily=False)  # The day's spend moves with model calls.
        if stop is None and (plan := proposed_in(self.state, finished)) is not None:
            stop = ("plan", f"plan {plan.plan_id} waits for the person's decision")
        return stop

    def _exceeded(self) -> budgets.BudgetExceeded | None:
        """The session's budgets, then the day's (as the log has it now, other sessions too)."""
        totals, noted, grace = self._live_totals(), self.state.noted_budgets, self.config.turn_grace
        notice = turn_budget.grace_notice(self._limits, totals, grace, self.state.marks, noted)
        if notice is not None:
            self.emit(notice)
        limits = turn_budget.in_force(self._limits, grace, self.state.noted_budgets)
        spent = budgets.exceeded(limits, totals)
        if spent is None and self.daily is not None:
            spent = self.daily.exceeded(self.daily.spent())
        return spent

    def _warn_budgets(self, *, daily: bool = True) -> None:
        totals = self._live_totals()
        warned = self.state.warned_budgets
        found = budgets.warnings(self._limits, totals, warned)
        if daily and self.daily is not None:
            found += self.daily.warnings(self.daily.spent(), warned)
        for warning in found:
            self.emit(warning)

    def _note_budgets(self, usage: Usage | None = None) -> None:
        """Say, once each, which budgets cannot be enforced or count estimated tokens: from the
        price table at the start, then from each call's `usage`."""
        daily = self.daily.limits if self.daily is not None else None
        said = self.state.noted_budgets
        models = [*self.config.role_models.values(), self.config.model or self.state.model]
        for notice in (
            budget_notices.at_start(self._limits, daily, models, said)
            if usage is None
            else budget_notices.after_call(self._limits, daily, usage, said)
        ):
            self.emit(notice)

    @property
    def _limits(self) -> Limits:
        return self.config.limits or self.state.limits

    def _live_totals(self) -> Totals:
        return replace(self.state.totals, wall_s=wall_seconds(self.state, self.clock()))

    async def _verify(self) -> _Verified | None:
        """Check what changed since the last check; None when there was nothing to check or
        it passed, else whether the model gets another round (reason None) or the session stops.
        """
        if self.verifier is None or not self.state.unverified:
            return None
        outcome = await self.verifier.verify(sorted(self.state.unverified))
        round_ = self.state.failed_verifications + 1
        self.emit(replace(outcome, round=round_))
        if outcome.ok or not outcome.blocking:
            return None
        if round_ > self.config.max_verify_rounds:
            failed = len(outcome.failures)
            return _Verified(f"{failed} verification failure(s) remain after {round_} rounds")
        note = f"{outcome.report}\n\nFix these failures, then finish."
        self.emit(ContextAdded(source="verification", text=note))
        return _Verified(None)

    def _finish(self, reason: FinishReason, detail: str, final_text: str = "") -> SessionFinished:
        day = self.daily.spent() if self.daily is not None else None
        finished = SessionFinished(
            reason=reason,
            detail=detail,
            final_text=final_text,
            totals=self._live_totals(),
            day_cost_usd=day.cost_usd if day is not None else None,
            day_tokens=day.tokens if day is not None else None,
        )
        self.emit(finished)
        return finished
