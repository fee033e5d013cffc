"""Routes for what a person decides: approvals, the plan, the review of the change, a stop."""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Literal

from fastapi import APIRouter
from fastapi.responses import Response
from pydantic import BaseModel, Field

from kestrel.agent.planning import Approve, Reject
from kestrel.protocol.events import ApprovalScope, PermissionMode, PlanStep
from kestrel.server.deps import ERRORS, Caller, Host
from kestrel.server.hosting import Refusal, server_env
from kestrel.server.routes_sessions import SessionView, Strict, view
from kestrel.service.approvals import answer_approval, pending_approvals
from kestrel.service.decisions import NotRunning, decide_plan, request_cancel, status_of

router = APIRouter(responses=ERRORS)


class ApprovalView(BaseModel):
    """An open permission question."""

    session_id: str
    call_id: str
    tool: str
    arguments: str
    reason: str
    repeatable: bool


class AnswerBody(Strict):
    """The answer to a permission question."""

    allow: bool
    scope: ApprovalScope = "once"
    message: str = Field(default="", max_length=10_000)


class StepBody(Strict):
    """One step of a plan: what to do, where, how to check it, and which steps come first."""

    id: str = Field(min_length=1, max_length=100)
    title: str = Field(min_length=1, max_length=2_000)
    files: list[str] = Field(default_factory=list, max_length=200)
    checks: list[str] = Field(default_factory=list, max_length=50)
    depends_on: list[str] = Field(default_factory=list, max_length=100)


class PlanView(BaseModel):
    """The plan a session waits on a decision for."""

    plan_id: str
    summary: str
    steps: list[StepBody]


class PlanBody(Strict):
    """The decision on the plan the session waits on; an approval may carry the person's edit
    of it (steps reordered, changed, removed or added, and the summary)."""

    decision: Literal["approve", "reject"]
    feedback: str = Field(default="", max_length=10_000)
    permission_mode: PermissionMode | None = None
    steps: list[StepBody] | None = Field(default=None, max_length=100)
    summary: str | None = Field(default=None, max_length=10_000)


class ReviewBody(Strict):
    """The decision on the change: apply it, discard it, or send it back with feedback."""

    action: Literal["apply", "discard", "reject"]
    feedback: str = Field(default="", max_length=10_000)
    accept_security_findings: bool = Field(
        default=False,
        description="With `apply`: apply even though the security gate found a secret or a "
        "high-severity problem; the session's log records the accepted findings.",
    )


class ReviewResult(BaseModel):
    """What the review did, in the command's own words."""

    action: str
    ok: bool
    output: str


@router.get("/sessions/{session_id}/approvals")
def approvals(session_id: str, who: Caller, host: Host) -> list[ApprovalView]:
    """The questions the session (or its subagents) waits on."""
    host.session(who, session_id)
    return [
        ApprovalView(
            session_id=p.session_id,
            call_id=p.question.call_id,
            tool=p.question.name,
            arguments=p.question.arguments,
            reason=p.question.reason,
            repeatable=p.question.repeatable,
        )
        for p in pending_approvals(host.store, session_id)
    ]


@router.post("/sessions/{session_id}/approvals/{call_id}")
def answer(session_id: str, call_id: str, body: AnswerBody, who: Caller, host: Host) -> SessionView:
    """Answer one open question; the session goes on at once."""
    hosted = host.session(who, session_id)
    answer_approval(
        host.store,
        session_id,
        allow=body.allow,
        call_id=call_id,
        scope=body.scope,
        message=body.message,
        by=f"api:{who.user_id}",
    )
    return view(host, hosted)


@router.post("/sessions/{session_id}/cancel", status_code=202)
async def cancel(session_id: str, who: Caller, host: Host) -> SessionView:
    """Stop the session: taken out of the queue, or asked to stop where it runs."""
    hosted = await asyncio.to_thread(host.session, who, session_id)
    if await host.pool.withdraw(session_id):
        await asyncio.to_thread(host.registry.claim, session_id, "queued", "idle")
    elif await asyncio.to_thread(host.registry.claim, session_id, "queued", "idle"):
        pass  # A worker took it but has not started it: now it will not.
    else:
        try:
            await asyncio.to_thread(request_cancel, host.store, session_id, by=f"api:{who.user_id}")
        except NotRunning as exc:
            # A run that is starting has not logged its start yet: stopped as SIGTERM does.
            if not await host.pool.terminate(session_id):
                raise Refusal(409, str(exc)) from None
    return await asyncio.to_thread(view, host, hosted)


@router.get("/sessions/{session_id}/plan")
def waiting_plan(session_id: str, who: Caller, host: Host) -> PlanView:
    """The plan the session waits on a decision for; 404 when none waits."""
    host.session(who, session_id)
    proposed = status_of(host.store, session_id).state.plan
    if proposed is None:
        raise Refusal(404, f"session {session_id} has no plan waiting for a decision")
    steps = [
        StepBody(
            id=s.id,
            title=s.title,
            files=list(s.files),
            checks=list(s.checks),
            depends_on=list(s.depends_on),
        )
        for s in proposed.steps
    ]
    return PlanView(plan_id=proposed.plan_id, summary=proposed.summary, steps=steps)


@router.post("/sessions/{session_id}/plan", status_code=202)
def plan(session_id: str, body: PlanBody, who: Caller, host: Host) -> SessionView:
    """Approve or reject the plan the session waits on; it runs again with the decision."""
    hosted = host.session(who, session_id)
    decision: Approve | Reject
    if body.decision == "reject":
        if not body.feedback.strip():
            raise Refusal(400, "say why the plan is rejected (feedback)")
        decision = Reject(reason=body.feedback)
    else:
        mode = body.permission_mode if body.permission_mode not in (None, "plan") else "default"
        edited = None if body.steps is None else tuple(_step(step) for step in body.steps)
        decision = Approve(mode=mode or "default", steps=edited, summary=body.summary)
    # Held (queued, not yet handed to a worker) while the decision is logged: a second decision
    # or a follow-up sent meanwhile gets 409 instead of running the session twice.
    if not host.registry.claim(session_id, "idle", "queued"):
        raise Refusal(409, f"session {session_id} is {hosted.status}; decide when it stops")
    try:
        message = decide_plan(host.store, session_id, decision)
    except BaseException:
        host.registry.claim(session_id, "queued", "idle")
        raise
    host.pool.submit(hosted, message)
    return view(host, host.session(who, session_id))


def _step(body: StepBody) -> PlanStep:
    return PlanStep(
        id=body.id,
        title=body.title,
        files=tuple(body.files),
        checks=tuple(body.checks),
        depends_on=tuple(body.depends_on),
    )


_DIFF: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/x-diff": {"schema": {"type": "string"}}}}
}


@router.get("/sessions/{session_id}/diff", response_class=Response, responses=_DIFF)
async def diff(session_id: str, who: Caller, host: Host) -> Response:
    """The change the session left waiting for review, as a unified diff (empty: none)."""
    hosted = host.session(who, session_id)
    code, out = await _kestrel(host, hosted.checkout, "diff", session_id)
    if code != 0:
        raise Refusal(409, out.strip() or "the change cannot be shown")
    text = out if out.startswith(("diff ", "---")) else _diff_part(out)
    return Response(text, media_type="text/x-diff")


@router.post("/sessions/{session_id}/review")
async def review(session_id: str, body: ReviewBody, who: Caller, host: Host) -> ReviewResult:
    """Apply the change to the session's checkout, discard it, or reject it with feedback
    (a follow-up the session runs with)."""
    hosted = await asyncio.to_thread(host.session, who, session_id)
    busy = Refusal(409, f"session {session_id} is {hosted.status}; review it when it stops")
    if body.action == "reject":
        if not body.feedback.strip():
            raise Refusal(400, "say what to change (feedback)")
        said = f"The reviewer asked for changes: {body.feedback}"
        if not await asyncio.to_thread(host.pool.submit, hosted, said, only_if="idle"):
            raise busy
        return ReviewResult(action="reject", ok=True, output="sent back to the session")
    # Marked running while the change is applied or discarded, so nothing runs it meanwhile.
    if not await asyncio.to_thread(host.registry.claim, session_id, "idle", "running"):
        raise busy
    accept = body.action == "apply" and body.accept_security_findings
    args = (body.action, *(("--accept-security-findings",) if accept else ()), session_id)
    try:
        code, out = await _kestrel(host, hosted.checkout, *args)
    finally:
        await asyncio.to_thread(host.registry.claim, session_id, "running", "idle")
    return ReviewResult(action=body.action, ok=code == 0, output=out.strip())


class RewindBody(Strict):
    """Where to go back to, and what to do from there."""

    checkpoint: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
    message: str | None = Field(default=None, min_length=1, max_length=100_000)


@router.post("/sessions/{session_id}/rewind", status_code=202)
async def rewind(session_id: str, body: RewindBody, who: Caller, host: Host) -> SessionView:
    """Restore the session's files to a checkpoint (`GET .../checkpoints` lists them) and, with
    a message, run on from there; 409 while the session runs, 400 for an unknown checkpoint."""
    hosted = await asyncio.to_thread(host.session, who, session_id)
    if not await asyncio.to_thread(host.registry.claim, session_id, "idle", "running"):
        raise Refusal(409, f"session {session_id} is {hosted.status}; rewind it when it stops")
    try:
        args = ("rewind", "-p", "--", session_id, body.checkpoint)
        code, out = await _kestrel(host, hosted.checkout, *args)
    finally:
        await asyncio.to_thread(host.registry.claim, session_id, "running", "idle")
    if code != 0:
        raise Refusal(400, _last_line(out) or f"the session cannot be rewound to {body.checkpoint}")
    if body.message is not None:
        await asyncio.to_thread(host.pool.submit, hosted, body.message, only_if="idle")
    return await asyncio.to_thread(view, host, hosted)


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1].removeprefix("kestrel: ") if lines else ""


def _diff_part(output: str) -> str:
    """The diff of `kestrel diff`'s output, without its summary lines."""
    at = output.find("\ndiff ")
    return output[at + 1 :] if at >= 0 else ""


async def _kestrel(host: Host, cwd: object, *args: str) -> tuple[int, str]:
    """Run a `kestrel` command for a session in a process of its own (it may open the
    session's overlay, which this multi-threaded process cannot)."""
    env = server_env(host.config)  # In cluster mode, with the cluster's database.
    env.update(HOME=str(host.config.data_dir / "home"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kestrel",
        *args,
        cwd=str(cwd),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode(errors="replace")
