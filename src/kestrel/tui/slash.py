"""What each slash command does in the view, and how a message is sent."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, get_args

from rich.text import Text

from kestrel import app as composition
from kestrel.agent.loop import AgentLoop
from kestrel.protocol.errors import KestrelError
from kestrel.protocol.events import PermissionMode
from kestrel.service import review as review_service
from kestrel.service import shell
from kestrel.service.compact import NotCompacted, compact_now
from kestrel.tui import init_cmd, memory_cmd, review
from kestrel.tui.blocks import diff_text
from kestrel.tui.commands import help_text, parse_slash
from kestrel.tui.dialogs import PickerScreen, TextScreen
from kestrel.tui.status import budget_left, cost, count

if TYPE_CHECKING:
    from kestrel.tui.app import KestrelApp

MODES: tuple[str, ...] = get_args(PermissionMode)
AT_REST = {"model", "rewind", "apply", "discard", "resume", "sessions", "clear", "compact"}
"""Commands that need the session at rest: no step running."""


def send(view: KestrelApp, text: str) -> None:
    """Send a message (now, or after the running step)."""
    view.driver.submit(text)


async def run(view: KestrelApp, text: str) -> bool:
    """Carry out the command `text` names; False when it is an ordinary message."""
    slash = parse_slash(text)
    if slash is None:
        return False
    name, arguments = slash.name, slash.arguments
    if name in AT_REST and view.driver.busy:
        view.notice(f"/{name} waits for the running step: press Esc to stop it first.")
        return True
    try:
        await _dispatch(view, name, arguments)
    except (KestrelError, OSError) as exc:
        view.notice(str(exc), error=True)
    view.refresh_status()
    return True


def run_shell(view: KestrelApp, text: str) -> None:
    """`!command`: run it in the session's workspace, through its rules and sandbox."""
    command = text.strip().removeprefix("!").strip()
    if not command:
        view.notice("! needs a command: !git status runs it in the session's sandbox.")
    elif view.driver.busy:
        view.notice("!command waits for the running step: press Esc to stop it first.")
    elif view.driver.session_id is None:
        view.notice(
            "No session yet: a command runs in the session's workspace, through its rules "
            "and sandbox; send a message first."
        )
    else:
        view.driver.beside(lambda loop: shell.run_command(loop, command))


async def _dispatch(view: KestrelApp, name: str, arguments: str) -> None:
    handlers = {
        "help": _help,
        "model": _model,
        "mode": _mode,
        "plan": _plan,
        "rewind": _rewind,
        "diff": _diff,
        "apply": _apply,
        "discard": _discard,
        "cost": _cost,
        "compact": _compact,
        "memory": memory_cmd.run,
        "init": init_cmd.run,
        "sessions": _resume,
        "resume": _resume,
        "clear": _clear,
        "quit": _quit,
    }
    handler = handlers.get(name)
    if handler is not None:
        await handler(view, arguments)
    elif name in view.custom:
        send(view, view.custom[name].prompt(arguments))
    else:
        view.notice(f"/{name} is not a command; /help lists them.")


async def _help(view: KestrelApp, _: str) -> None:
    view.push_screen(TextScreen("Help", Text(help_text(view.custom))))


async def _model(view: KestrelApp, arguments: str) -> None:
    driver = view.driver
    if not arguments:
        view.notice(f"model: {driver.settings.model}; change it with /model PROVIDER:MODEL")
        return
    settings = driver.settings
    composition.build_provider(arguments, base_url=settings.base_url, cwd=view.cwd)
    driver.settings = settings.model_copy(update={"model": arguments})
    driver.close_run()  # The next step builds its loop with the new model.
    view.notice(f"From the next message on: {arguments}")


async def _mode(view: KestrelApp, arguments: str) -> None:
    if arguments not in MODES:
        view.notice(f"/mode {'|'.join(MODES)}")
        return
    if arguments == "bypass" and view.driver.settings.sandbox != "bwrap":
        view.notice("bypass mode needs the sandbox (sandbox = bwrap)", error=True)
        return
    view.driver.mode = arguments  # type: ignore[assignment]
    view.driver.apply_mode()
    view.notice(f"mode {arguments}")


async def _plan(view: KestrelApp, arguments: str) -> None:
    driver, plan = view.driver, view.state.plan
    if plan is not None and view.state.finished is not None and not arguments:
        answer = await view.plan(plan)
        if answer is not None:
            driver.submit(review.decide(driver, answer))
        return
    driver.mode = "plan"
    driver.apply_mode()
    view.notice("Plan mode: the agent explores read-only and proposes a plan to decide on.")
    if arguments:
        send(view, arguments)


async def _rewind(view: KestrelApp, _: str) -> None:
    driver = view.driver
    if driver.session_id is None:
        view.notice("No session yet: nothing to rewind.")
        return
    found = review.checkpoints_in(view.store.read(driver.session_id))
    if not found:
        view.notice("No checkpoints yet: they are recorded when a tool changes files.")
        return
    choices = [(c.checkpoint_id, _checkpoint_label(c)) for c in found]
    chosen = await view.ask(PickerScreen("Rewind the files to which checkpoint?", choices))
    if chosen is not None:
        await review.rewind(driver, chosen)


def _checkpoint_label(checkpoint: review.Checkpoint) -> str:
    files = ", ".join(checkpoint.files[:3]) + (" …" if len(checkpoint.files) > 3 else "")
    return f"{checkpoint.label}" + (f" — {files}" if files else "")


async def _diff(view: KestrelApp, _: str) -> None:
    sid = view.driver.session_id
    if sid is None:
        view.notice("No session yet: no change.")
        return
    _, pending = await asyncio.to_thread(review_service.pending_diff, view.store, sid)
    if pending is None:
        view.notice("No change waits for review.")
        return
    view.push_screen(TextScreen("The waiting change", diff_text(pending.diff, limit=5000)))


async def _apply(view: KestrelApp, _: str) -> None:
    if view.driver.session_id is None:
        view.notice("No session yet: nothing to apply.")
        return
    if (await view.driver.open()).view is None:
        view.notice("This session edits the checkout directly: there is nothing to apply.")
        return
    await review.hand_over(view.driver, None)


async def _discard(view: KestrelApp, _: str) -> None:
    if view.driver.session_id is None:
        view.notice("No session yet: nothing to discard.")
        return
    await review.discard(view.driver)


async def _compact(view: KestrelApp, _: str) -> None:
    if view.driver.session_id is None:
        view.notice("No session yet: nothing to compact.")
        return

    async def job(loop: AgentLoop) -> None:
        outcome = await compact_now(loop)
        if isinstance(outcome, NotCompacted):
            view.notice(f"Nothing compacted: {outcome.reason}.")

    view.notice("Compacting the conversation…")
    view.driver.beside(job)


async def _cost(view: KestrelApp, _: str) -> None:
    t = view.state.totals
    lines = [
        f"turns: {t.turns} · tool calls: {t.tool_calls}",
        f"tokens: {count(t.tokens)} (input {count(t.input_tokens)}, output "
        f"{count(t.output_tokens)}, cache read {count(t.cache_read_tokens)}, cache write "
        f"{count(t.cache_write_tokens)})",
        f"cost: {cost(t)}",
        f"budget left: {budget_left(view.state.limits, t)}",
    ]
    view.push_screen(TextScreen("Spent so far", Text("\n".join(lines))))


async def _resume(view: KestrelApp, arguments: str) -> None:
    if arguments:
        await view.resume_session(view.store.resolve(arguments))
        return
    mine = [
        s for s in view.store.sessions() if s.parent_session_id is None and s.cwd == str(view.cwd)
    ]
    if not mine:
        view.notice("No earlier session in this folder.")
        return
    choices = [
        (s.session_id, f"{s.status:<9} {(s.task.splitlines() or [''])[0][:80]}") for s in mine[:50]
    ]
    chosen = await view.ask(PickerScreen("Resume which session?", choices))
    if chosen is not None:
        await view.resume_session(chosen)


async def _clear(view: KestrelApp, _: str) -> None:
    view.driver.forget()
    view.clear_view()
    view.notice("The next message starts a new session.")


async def _quit(view: KestrelApp, _: str) -> None:
    await view.action_quit_view()
