"""One model step of the agent loop: the request, the streamed reply logged as it comes, and the
callbacks that log retries and moves to another model."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from kestrel.agent.big_arguments import DeltaCap, shrink_message
from kestrel.agent.ports import OnRetry, OnSwitch
from kestrel.agent.prompt import with_task_list
from kestrel.agent.usage_estimate import saved, spent
from kestrel.protocol.errors import ProviderError
from kestrel.protocol.events import (
    Event,
    ModelCompleted,
    ModelRequestStarted,
    ModelRetrying,
    ModelRole,
    ModelSwitched,
    ModelTextDelta,
    ModelToolCallDelta,
    Record,
)
from kestrel.protocol.messages import Completion, ModelRequest, TextDelta, ToolCallDelta

if TYPE_CHECKING:
    from kestrel.agent.loop import AgentLoop


def reporters(
    emit: Callable[[Event], Record], request_id: str, role: ModelRole
) -> tuple[OnRetry, OnSwitch]:
    """Callbacks that log the request's retries and its moves to another model."""

    def on_retry(attempt: int, delay_s: float, error: ProviderError) -> None:
        kind = type(error).__name__
        emit(
            ModelRetrying(
                request_id=request_id,
                attempt=attempt,
                delay_s=delay_s,
                error_kind=kind,
                message=str(error),
            )
        )

    def on_switch(from_model: str, to_model: str, error: ProviderError) -> None:
        kind = type(error).__name__
        emit(
            ModelSwitched(
                request_id=request_id,
                role=role,
                from_model=from_model,
                to_model=to_model,
                error_kind=kind,
                message=str(error),
            )
        )

    return on_retry, on_switch


async def take(loop: AgentLoop) -> ModelCompleted:
    """Ask the model for the next turn, logging its text and calls as they stream."""
    request_id = uuid.uuid4().hex[:12]
    role = loop._role()
    model = loop.config.role_models.get(role) or loop.config.model or loop.state.model
    loop.emit(
        ModelRequestStarted(
            request_id=request_id, model=model, turn=loop.state.totals.turns + 1, role=role
        )
    )
    request = ModelRequest(
        system=loop.config.system_prompt,
        messages=with_task_list(loop.state.messages, loop.state.todos),
        tools=loop.tools.specs(),
        max_output_tokens=loop.config.max_output_tokens,
    )
    on_retry, on_switch = reporters(loop.emit, request_id, role)
    stream = loop.streamer(request, role=role, on_retry=on_retry, on_switch=on_switch)
    cap = DeltaCap()  # Arguments too long to keep are not logged piece by piece either.
    async for part in stream:
        if isinstance(part, TextDelta):
            loop.emit(ModelTextDelta(request_id=request_id, text=part.text))
        elif isinstance(part, ToolCallDelta):
            delta = cap.take(part.index, part.arguments_delta)
            if delta or part.call_id or part.name or not part.arguments_delta:
                loop.emit(
                    ModelToolCallDelta(
                        request_id=request_id,
                        index=part.index,
                        call_id=part.call_id,
                        name=part.name,
                        arguments_delta=delta,
                    )
                )
        elif isinstance(part, Completion):
            completed = ModelCompleted(
                request_id=request_id,
                message=shrink_message(part.message, loop.environment.artifacts_dir),
                usage=spent(part, request),
                stop_reason=part.stop_reason,
                cached=part.cached,
                saved_usage=saved(part, request),
            )
            loop.emit(completed)
            loop._note_budgets(completed.usage)
            return completed
    raise ProviderError("the model's reply ended without completing")
