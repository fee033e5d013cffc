"""A finished session resumed without a message: no model call, only what to do next.

Resuming a session whose task is done has nothing to send the model; calling it anyway would
spend money on an empty turn. The person is told the session is finished and how to follow up,
and at a terminal may type the follow-up there.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from rich.console import Console

from kestrel.cli.drive import prompt_follow_up
from kestrel.cli.idle_flags import idle_after_finish
from kestrel.protocol.errors import ConfigError

if TYPE_CHECKING:
    from kestrel.cli.session_runner import RunRequest


def follow_up_of_finished(
    request: RunRequest, session_id: str, console: Console, *, quiet: bool
) -> str | None:
    """The follow-up typed at a terminal, or None (then the command ends with exit code 0).

    Without a terminal (`quiet`), a run flag given too is refused: no run follows.
    """
    if quiet and (flag := idle_after_finish(run_flags(request))) is not None:
        raise ConfigError(
            f"{flag} has no effect: session {session_id} is finished and no message was "
            f'given; follow up with: kestrel resume {session_id} "message" {flag} ...'
        )
    console.print(
        f"Session {session_id} is finished. Follow up with: "
        f'kestrel resume {session_id} "message"'
        + ("" if quiet else " (or type it now; Enter leaves)"),
        soft_wrap=True,
        markup=False,
    )
    return None if quiet else asyncio.run(prompt_follow_up(console))


def run_flags(request: RunRequest) -> dict[str, object]:
    """The flags of a resume that only shape the run that follows, by their option names."""
    return {
        "--model": request.model,
        "--max-turns": request.max_turns,
        "--max-cost": request.max_cost,
        "--permission-mode": request.permission_mode,
        "--sandbox": request.sandbox,
        "--workspace": request.workspace,
        "--allow": request.allow,
        "--deny": request.deny,
    }
