"""Questions put to the editor: a run's permission questions, and whether to apply its change.

A permission question was logged by the run, which waits for its answer in the log; the
editor's choice is written there through the service (`answer_approval`). The first answer
counts: one given meanwhile elsewhere (`kestrel approve`) settles the question, and the
editor's later one is dropped.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

from acp.exceptions import RequestError
from acp.helpers import text_block, tool_content
from acp.interfaces import Client
from acp.schema import (
    AllowedOutcome,
    ContentToolCallContent,
    FileEditToolCallContent,
    PermissionOption,
    RequestPermissionResponse,
    TerminalToolCallContent,
    ToolCallUpdate,
)

from kestrel.acp.modes import ANSWERS, permission_options
from kestrel.acp.tool_view import arguments_of, view_of
from kestrel.protocol.events import ApprovalRequested, ApprovalScope, ChangesReady, PlanProposed
from kestrel.service.approvals import NoSuchApproval, answer_approval
from kestrel.store.base import EventStore

logger = logging.getLogger(__name__)

ANSWERED_BY = "editor (ACP)"
APPLY = "apply"
KEEP = "keep"
APPROVE = "approve-plan"
REJECT_PLAN = "reject-plan"


@dataclass(slots=True)
class Asker:
    """Puts questions to the editor and writes its answers to the session's log."""

    client: Client
    store: EventStore
    session_id: str
    cwd: Path
    _waiting: set[asyncio.Task[RequestPermissionResponse]] = field(default_factory=set)

    async def ask(self, log_id: str, question: ApprovalRequested) -> None:
        """Ask the editor about a call the run (or its subagent, whose log is `log_id`) waits
        on, then answer it in the log."""
        allowed = await self._choose(_permission_call(question, self.cwd), question)
        allow, scope = allowed if allowed is not None else (False, "once")
        message = "" if allowed is not None else "the person cancelled the prompt in the editor"
        try:
            answer_approval(
                self.store,
                self.session_id,
                allow=allow,
                call_id=question.call_id,
                scope=scope,
                message=message,
                by=ANSWERED_BY,
            )
        except NoSuchApproval:
            logger.info("call %s in %s was answered elsewhere first", question.call_id, log_id)

    async def ask_apply(self, ready: ChangesReady, seq: int) -> bool:
        """Whether the editor wants the change that waits for review applied now."""
        call = ToolCallUpdate(
            tool_call_id=f"apply-{self.session_id}-{seq}",
            title=f"Apply the change to your checkout ({ready.summary})",
            kind="edit",
            status="pending",
            content=[
                tool_content(text_block("\n".join(f"{f.status} {f.path}" for f in ready.files)))
            ],
        )
        options = [
            PermissionOption(option_id=APPLY, name="Apply to the checkout", kind="allow_once"),
            PermissionOption(option_id=KEEP, name="Keep it for review", kind="reject_once"),
        ]
        chosen = await self._request(call, options)
        return chosen == APPLY

    async def ask_plan(self, plan: PlanProposed, seq: int) -> bool | None:
        """Whether the editor approves the proposed plan (None: it did not answer)."""
        steps = "\n".join(f"{n}. {step.title}" for n, step in enumerate(plan.steps, 1))
        call = ToolCallUpdate(
            tool_call_id=f"plan-{self.session_id}-{seq}",
            title="Approve the plan and start on it",
            kind="think",
            status="pending",
            content=[tool_content(text_block(f"{plan.summary}\n\n{steps}".strip()))],
        )
        options = [
            PermissionOption(option_id=APPROVE, name="Approve and start", kind="allow_once"),
            PermissionOption(option_id=REJECT_PLAN, name="Reject", kind="reject_once"),
        ]
        chosen = await self._request(call, options)
        return None if chosen is None else chosen == APPROVE

    def cancel_all(self) -> None:
        """Withdraw every question still open (the prompt was cancelled or ended)."""
        for task in list(self._waiting):
            task.cancel()

    async def _choose(
        self, call: ToolCallUpdate, question: ApprovalRequested
    ) -> tuple[bool, ApprovalScope] | None:
        chosen = await self._request(call, permission_options(question))
        if chosen is None:
            return None
        return ANSWERS.get(chosen, (False, "once"))

    async def _request(self, call: ToolCallUpdate, options: list[PermissionOption]) -> str | None:
        """The option the editor chose; None when it cancelled or could not answer."""
        task = asyncio.ensure_future(
            self.client.request_permission(
                session_id=self.session_id, tool_call=call, options=options
            )
        )
        self._waiting.add(task)
        try:
            response = await task
        except asyncio.CancelledError:
            return None
        except (RequestError, ConnectionError) as exc:
            logger.warning("the editor did not answer a permission request: %s", exc)
            return None
        finally:
            self._waiting.discard(task)
        outcome = response.outcome
        return outcome.option_id if isinstance(outcome, AllowedOutcome) else None


def _permission_call(question: ApprovalRequested, cwd: Path) -> ToolCallUpdate:
    """The call a question is about, as the editor shows it: title, kind, files, why Kestrel
    asks, and for an edit the text it would replace."""
    view = view_of(question.name, question.arguments, cwd, question.kind)
    content: list[ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent] = []
    args = arguments_of(question.arguments)
    path, old, new = args.get("path"), args.get("old_str"), args.get("new_str")
    if question.name == "edit_file" and all(isinstance(v, str) for v in (path, old, new)):
        content.append(
            FileEditToolCallContent(
                type="diff", path=str(cwd / str(path)), old_text=str(old), new_text=str(new)
            )
        )
    content.append(tool_content(text_block(f"Kestrel asks because {question.reason}")))
    return ToolCallUpdate(
        tool_call_id=question.call_id,
        title=view.title,
        kind=view.kind,
        status="pending",
        content=content,
        locations=view.locations or None,
        raw_input=view.raw_input,
    )
