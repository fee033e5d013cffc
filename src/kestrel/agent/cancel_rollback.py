"""A call that Ctrl-C or SIGTERM cuts short is rolled back at once, as a resume does after a crash.

Stopping a session is not a crash, but it leaves the same thing behind: a command or an edit that
ran part of the way. The call's rollback point (the checkpoint taken just before it) is restored
before the session ends, the files as the stop left them are kept as a checkpoint of their own,
and the call's result says so. If the rollback itself is stopped or fails, the call is left
without a result, so that `kestrel diff`/`apply` refuse the session and the next resume rolls the
call back from the same point.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kestrel.agent.ports import Checkpointer
from kestrel.agent.rollback import cut_short, interrupted, rollback_point
from kestrel.agent.session import catch_up
from kestrel.agent.state import SessionState
from kestrel.protocol.errors import KestrelError
from kestrel.protocol.events import CheckpointCreated, Event, Record, ToolKind

KEPT_LABEL = "the files as the stop left them, before the rollback"


async def settle_cancelled(
    state: SessionState,
    emit: Callable[[Event], Record],
    checkpointer: Checkpointer | None,
    kind_of: Callable[[str], ToolKind | None],
    *,
    why: str,
    outside: str = "",
) -> frozenset[str]:
    """Roll back the call that may change files that a stop cut short; return the ids of the
    calls to leave without a result for a resume to settle (that call, when its rollback was
    itself stopped or failed)."""
    target = cancelled_call(state, checkpointer, kind_of)
    if target is None or checkpointer is None:
        return frozenset()
    try:
        done = await roll_back(state, emit, checkpointer, target, why=why, outside=outside)
    except asyncio.CancelledError:  # Stopped again while rolling back.
        done = False
    return frozenset() if done else frozenset({target[0]})


def cancelled_call(
    state: SessionState,
    checkpointer: Checkpointer | None,
    kind_of: Callable[[str], ToolKind | None],
) -> tuple[str, str] | None:
    """The id of the running call that may change files, and its rollback point; None when
    there is none, or nothing to roll it back to."""
    if checkpointer is None:
        return None
    call = cut_short(state, kind_of)
    point = rollback_point(state)
    return None if call is None or point is None else (call.id, point)


async def roll_back(
    state: SessionState,
    emit: Callable[[Event], Record],
    checkpointer: Checkpointer,
    target: tuple[str, str],
    *,
    why: str,
    outside: str = "",
) -> bool:
    """Restore the cut call's rollback point and log its result; False (nothing logged) when
    the checkpoint could not be recorded or restored."""
    call_id, point = target
    try:
        kept = await checkpointer.snapshot("before the rollback")
        await checkpointer.restore(point)
    except KestrelError:
        return False
    call = state.calls[call_id]
    text = (
        f"[kestrel] Interrupted and rolled back: {why} while this call was running, and the "
        f"files were restored to checkpoint {point[:12]}, taken just before it, so nothing of "
        "it remains in the workspace. Run it again if it is still needed."
    )
    if outside:
        text += f" It could reach {outside}: whatever it did there was not undone."
    emit(interrupted(call, text))
    if kept is not None:
        emit(CheckpointCreated(checkpoint_id=kept.checkpoint_id, label=KEPT_LABEL))
    await catch_up(state, emit, checkpointer, "the files after the rollback")
    return True
