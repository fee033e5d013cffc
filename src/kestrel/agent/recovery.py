"""Breaking a loop once: go back to before it began, ask for another approach, then stop.

When failing results oscillate between two states, the conversation goes back to the request
before the loop began (and the files to the checkpoint that held them then, where one did), with
a note asking the model for a different approach. That happens once per session; if a loop is
caught again, the session stops with reason `loop`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kestrel.agent.loops import (
    Oscillation,
    OscillationDetector,
    failure_signature,
    gist,
    signature,
)
from kestrel.agent.ports import Checkpointer
from kestrel.agent.state import SessionState
from kestrel.protocol.errors import KestrelError
from kestrel.protocol.events import (
    ErrorOccurred,
    Event,
    FinishReason,
    LoopDetected,
    LoopRecovered,
    Record,
    ToolFinished,
)
from kestrel.protocol.messages import ToolCall

MAX_RECOVERIES = 1
"""Times a session is rewound past a loop before a loop stops it."""


def failed(result: ToolFinished) -> bool:
    """Whether a result is a failing state: an error, or a command that exited non-zero."""
    return result.is_error or result.exit_code not in (None, 0)


def recovery_note(detail: str, files_restored: bool) -> str:
    """What the model reads after the rewound conversation."""
    files = (
        ", and the files were restored to how they were then"
        if files_restored
        else "; the files were not restored, so they may still hold changes made during the "
        "loop: read them before relying on them"
    )
    return (
        f"[kestrel] Loop recovery: {detail}. The conversation went back to before that loop "
        f"began{files}. What was tried in it did not work: take a different approach this "
        "time (re-read the failing code and the whole error, question the assumption behind "
        "the earlier attempts, or take a smaller step). If the loop comes back, the session stops."
    )


@dataclass(slots=True)
class LoopRecovery:
    """Watches finished calls for oscillation and breaks the first one by going back."""

    state: SessionState
    emit: Callable[[Event], Record]
    checkpointer: Checkpointer | None
    after: int = 4
    detector: OscillationDetector = field(init=False)

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Watch afresh, having seen the results the conversation holds now."""
        self.detector = OscillationDetector(self.after)
        for call_id, result in self.state.results.items():
            if (call := self.state.calls.get(call_id)) is not None:
                self._observe(call, result)

    def _observe(self, call: ToolCall, result: ToolFinished) -> Oscillation | None:
        return self.detector.observe(
            call.id,
            signature(call, ""),
            failure_signature(call, result.content, self.state.marks.result_files.get(call.id, "")),
            gist(result.content),
            failed=failed(result),
        )

    async def check(
        self, finished: Sequence[tuple[ToolCall, str]]
    ) -> tuple[FinishReason, str] | None:
        """After a turn's calls: go back past a loop they close, or say why the session stops."""
        found = None
        for call, _ in finished:
            result = self.state.results.get(call.id)
            if result is not None and (seen := self._observe(call, result)) is not None:
                found = found or seen
        if found is None:
            return None
        target = self.state.marks.target(found.first_call)
        if self.state.marks.recoveries >= MAX_RECOVERIES or target is None:
            again = " again after going back once" if self.state.marks.recoveries else ""
            detail = f"{found.detail}{again}"
            self.emit(LoopDetected(pattern="oscillate", action="stop", detail=detail))
            return ("loop", detail)
        checkpoint = await self._restore(target.checkpoint_id)
        self.emit(
            LoopRecovered(
                pattern="oscillate",
                detail=found.detail,
                to_seq=target.seq,
                checkpoint_id=checkpoint,
                note=recovery_note(found.detail, checkpoint is not None),
            )
        )
        self.reset()
        return None

    async def _restore(self, checkpoint_id: str | None) -> str | None:
        """Restore the files when a checkpoint holds them; the checkpoint restored, or None."""
        if checkpoint_id is None or self.checkpointer is None:
            return None
        try:
            await self.checkpointer.restore(checkpoint_id)
        except KestrelError as exc:
            self.emit(
                ErrorOccurred(error_kind=type(exc).__name__, message=str(exc), recoverable=True)
            )
            return None
        return checkpoint_id
