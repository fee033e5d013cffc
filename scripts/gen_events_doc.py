"""Print docs/events.md: the event schema, its field tables generated from the event dataclasses.

After changing `kestrel.protocol.events`, run `python scripts/gen_events_doc.py > docs/events.md`.
Every field needs a line in `MEANING` below; the script refuses to print a table with a gap.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

from kestrel.protocol.events import SCHEMA_VERSION, Event

WHEN = {
    "session_started": "First record of every session (seq 1), written before anything else.",
    "session_resumed": "When a process picks a stopped or crashed session up again, before it "
    "settles the calls the earlier process left unfinished.",
    "user_message": "The task, right after `session_started`, and each follow-up message.",
    "model_request_started": "Before each call to the model.",
    "model_text_delta": "For each piece of text as the model streams it.",
    "model_tool_call_delta": "For each piece of a tool call as the model streams it.",
    "model_retrying": "When a model call failed in a way worth retrying, before the wait.",
    "model_switched": "When a model call failed (overloaded, rate limited past its retries, a "
    "server error or a timeout) before any reply, and the same request goes to the next model "
    "of its role.",
    "model_completed": "When the model's reply is complete; it holds the whole reply, so a "
    "reader may ignore the deltas.",
    "tool_call_requested": "For each tool call in a completed reply, before permission is asked.",
    "permission_decided": "Once per tool call, before it runs or is refused.",
    "approval_requested": "When a tool call needs a person's answer (the mode, a rule or the "
    "classifier asks), before anyone is asked; headless without a way to answer, it is "
    "followed at once by a denying `permission_decided`.",
    "approval_decided": "When a person answers an open question: at the terminal running the "
    "session, with `kestrel approve` from another, or through the service. The first answer "
    "counts; the session's `permission_decided` follows.",
    "cancel_requested": "When a person asks a running session to stop from another process "
    "(`kestrel cancel`, the service); the process running it stops it as after Ctrl-C.",
    "tool_started": "When an allowed tool call begins to run.",
    "tool_output_chunk": "As a running command writes output.",
    "tool_finished": "When a tool call ends: it ran, it was refused, or it was interrupted.",
    "file_changed": "Before each file write a tool makes, so the log shows it even if the "
    "write is cut short.",
    "checkpoint_created": "Before the first tool call that may change files (the baseline), "
    "then after each batch of edits or commands that changed any file.",
    "verification_finished": "When the model says it is done and files changed since the last "
    "check. Where commands run outside the sandbox, the checks that run the project's own code "
    "are not run: the event then says the change was not verified, and why.",
    "changes_ready": "When a session working in an overlay ends a run with changes, before "
    "they are applied or left for `kestrel diff` and `kestrel apply`.",
    "changes_applied": "When the change is applied to the checkout (at the end of a session "
    "allowed to edit, or by `kestrel apply`), could not be, or was discarded.",
    "rewound": "When the person rewinds a session to a checkpoint, after the files are restored.",
    "budget_warning": "Once per budget, when the spend passes 80% of its limit.",
    "budget_notice": "Once per budget and session: at the start when a cost budget is set and "
    "the model has no known price, and after the first reply whose server reported no usage when "
    "a token budget is set.",
    "loop_detected": "When the model repeats the same calls (`warn`), and again if it goes on "
    "(`stop`).",
    "loop_recovered": "Once per session, when failing results oscillate between two states: "
    "after the files are restored, before the model is asked again.",
    "hook_ran": "After each configured hook command ran (or failed to), before what it decided "
    "takes effect.",
    "context_added": "When Kestrel adds text to the conversation on the person's behalf: a "
    "`SessionStart` or `UserPromptSubmit` hook's context, a `Stop` hook's reason to go on, or a "
    "new session's first context (source `context engine`, before the first model turn, when "
    "`context.first_context_files` is set).",
    "context_compacted": "Before a model request that would fill the context window past "
    "`compaction.compact_at`, after the `PreCompact` hooks ran and the fast role summarised the "
    "older turns.",
    "prompt_blocked": "When a `UserPromptSubmit` hook refuses the person's latest message; the "
    "message is taken out of the conversation and the run ends with reason `hook`.",
    "injection_flagged": "Before the `tool_finished` of a call whose result holds text that reads "
    "like instructions to the agent.",
    "todo_updated": "When the model's `todo` call writes the task list, before that call's "
    "`tool_finished`, and when an approved plan becomes the task list.",
    "plan_proposed": "When the model's `propose_plan` call proposes a valid plan, before that "
    "call's `tool_finished`; the run then stops with reason `plan`.",
    "plan_decided": "When the person approves (perhaps after editing) or rejects the plan "
    "waiting for a decision, before the session continues.",
    "subagent_started": "When a `task` call starts a subagent, in the parent's log, before the "
    "child session's `session_started`.",
    "subagent_finished": "When the subagent's session stops (or, on a resume, when a subagent "
    "the earlier process left running is settled as interrupted), in the parent's log, before "
    "the `task` call's `tool_finished`.",
    "pull_request_opened": "When `kestrel pr` has pushed the change as a branch and the forge "
    "opened the pull request.",
    "pull_request_synced": "When `kestrel pr sync` has read new review comments and failed "
    "checks, after the follow-up they became ran and its fix was pushed (or found nothing new).",
    "error": "When something fails; the session may go on (`recoverable`) or finish.",
    "session_finished": "When the session stops, for any reason. Another may follow a "
    "`session_resumed`.",
}

MEANING: dict[str, dict[str, str]] = {
    "session_started": {
        "session_id": "The session's id, the same as the record's.",
        "task": "The task as the person gave it.",
        "cwd": "The working directory: the checkout the session works in.",
        "model": "The model, as `provider:model-id`.",
        "permission_mode": "How tool calls are approved at the start.",
        "limits": "The session's budgets.",
        "kestrel_version": "The Kestrel version that started the session.",
        "parent_session_id": "For a subagent's session, the session whose `task` call started "
        "it; null for a session a person started.",
        "parent_call_id": "For a subagent's session, the id of that `task` call in the parent's "
        "log; null otherwise.",
        "workspace": "Where its changes go: `overlay` (a layer over the checkout, handed over "
        "at the end) or `direct` (the checkout itself); empty in logs written before it was "
        "recorded. A resume works the same way, and refuses a `--workspace` that says otherwise.",
    },
    "session_resumed": {
        "from_seq": "The last seq the earlier process wrote.",
        "interrupted_calls": "Ids of calls left unfinished that this resume settled with a "
        "`tool_finished`.",
    },
    "user_message": {"text": "The person's text."},
    "model_request_started": {
        "request_id": "Id tying this request's deltas, retries and completion together.",
        "model": "The model asked, as `provider:model-id`.",
        "turn": "Number of this model call in the session, from 1.",
        "role": "What the call is for (`main`, `plan`, `fast` or `edit`); settings map each "
        "role to its models.",
    },
    "model_text_delta": {
        "request_id": "The request this belongs to.",
        "text": "The next piece of text; concatenate them in seq order.",
    },
    "model_tool_call_delta": {
        "request_id": "The request this belongs to.",
        "index": "Which of the reply's tool calls this piece belongs to, from 0.",
        "call_id": "The call's id, on the first piece of that call.",
        "name": "The tool's name, on the first piece of that call.",
        "arguments_delta": "The next piece of the arguments' JSON text.",
    },
    "model_switched": {
        "request_id": "The request that moved to another model.",
        "role": "The role whose next model now answers.",
        "from_model": "The model that failed, as `provider:model-id`.",
        "to_model": "The model the same request goes to now, as `provider:model-id`.",
        "error_kind": "The error's type, such as `Overloaded` or `RateLimited`.",
        "message": "The error's message.",
    },
    "model_retrying": {
        "request_id": "The request being retried.",
        "attempt": "Number of the attempt that failed, from 1.",
        "delay_s": "Seconds before the next attempt.",
        "error_kind": "The error's type, such as `RateLimited` or `Overloaded`.",
        "message": "The error's message.",
    },
    "model_completed": {
        "request_id": "The request that completed.",
        "message": "The whole reply: text and tool calls.",
        "usage": "Tokens, cost and latency of this call.",
        "stop_reason": "Why the model stopped writing.",
        "cached": "True when the reply was replayed from the response cache (an identical "
        "request earlier in the session, see configuration's `redis_url`): the call spent "
        "nothing, so `usage` has no tokens and no cost. Older logs have no such field: false.",
        "saved_usage": "With `cached`: the usage of the call whose reply was replayed, i.e. "
        "what the cache saved; null otherwise.",
    },
    "tool_call_requested": {
        "call": "The call as the model wrote it.",
        "read_only": (
            "True for calls that change nothing (reads and searches, and a `task` call whose "
            "subagent has only such tools). A resume rolls back a started call logged `false`."
        ),
    },
    "permission_decided": {
        "call_id": "The call decided on.",
        "decision": "Whether it may run.",
        "decided_by": "Who decided: the permission mode, a rule, the person, the headless "
        "default (nobody to ask), a hook, or the classifier of dangerous actions.",
        "reason": "Why, in words.",
        "source": "The rule (with the settings file it came from) or the hook command that "
        "decided; empty when the mode did.",
        "asked": "When the person was asked, or would have been: why.",
        "updated_arguments": "A `PreToolUse` hook's replacement for the call's arguments, as "
        "JSON text; the call runs with these.",
    },
    "approval_requested": {
        "call_id": "The call asked about.",
        "name": "The tool's name.",
        "arguments": "The call's arguments as JSON text, as it would run (after a hook's "
        "rewrite).",
        "kind": "What the tool may do: read, edit or execute.",
        "reason": "Why Kestrel asks: the mode, the rule, or the classifier's finding.",
        "repeatable": "False for a question asked every time (a dangerous action): an answer "
        "for the whole session does not cover it.",
    },
    "approval_decided": {
        "call_id": "The call answered.",
        "allow": "Whether it may run.",
        "scope": "`once`, or `session`: later calls of the same tool are allowed unasked.",
        "message": "The person's words; for a denial, what the model is told.",
        "by": "Who answered: `terminal`, `kestrel approve`, or a client of the service.",
    },
    "cancel_requested": {
        "by": "Who asked.",
        "reason": "Why, in the person's words (may be empty).",
    },
    "tool_started": {"call_id": "The call that began.", "name": "The tool's name."},
    "tool_output_chunk": {
        "call_id": "The running call.",
        "stream": "Which stream the text came from.",
        "text": "The output, as it came; not what the model sees (see `tool_finished`).",
    },
    "tool_finished": {
        "call_id": "The call that ended.",
        "name": "The tool's name.",
        "content": "Exactly what the model sees as the result.",
        "is_error": "True when the call failed, was refused or was interrupted.",
        "exit_code": "A command's exit status; null for other tools.",
        "duration_ms": "How long it ran, in milliseconds (0 when it never ran).",
        "truncated": "True when `content` was cut to fit the output limit.",
        "full_output_path": "Where the whole output was saved when it was cut.",
        "interrupted": "True when the call was stopped before it could finish.",
    },
    "file_changed": {
        "call_id": "The call making the write.",
        "path": "The file; relative to the working directory when it lies inside it.",
        "before_hash": "SHA-256 (hex) of the file before; null when the file is new.",
        "after_hash": "SHA-256 (hex) of the file after; null when the file is deleted.",
        "diff": "Unified diff of the change.",
    },
    "checkpoint_created": {
        "checkpoint_id": "The checkpoint's id; `kestrel rewind` takes it or a prefix.",
        "label": "What the checkpoint follows, e.g. `after edit_file, bash`.",
        "call_ids": "The calls whose changes it records; empty for the baseline.",
        "changes": "Paths changed since the previous checkpoint (none listed for the "
        "baseline, at most 200).",
        "more_changes": "How many more paths changed than `changes` lists.",
        "baseline": "True when a new overlay of the session starts here, on the checkout as it "
        "now is (after an earlier change was applied or discarded): the session's next change "
        "counts from this checkpoint.",
        "tree": "The git tree id of the recorded files: two checkpoints with the same tree hold "
        "the very same files (the loop detector tells a state that came back from progress by "
        "it). Empty where the files were not recorded with it.",
    },
    "rewound": {
        "checkpoint_id": "The checkpoint the files were restored to.",
        "to_seq": "The seq of that checkpoint's `checkpoint_created`: records after it, up to "
        "this one, no longer count for the conversation (their spending still counts).",
    },
    "verification_finished": {
        "round": "The how-many-th verification in a row since the person last wrote; after "
        "`verify.max_rounds` failed ones the session stops with reason `unverified`.",
        "ok": "Every check passed. False too when checks were `skipped` because commands run "
        "outside the sandbox: the change was not verified.",
        "blocking": "A check failed in a way the model can fix (a test, lint, type, syntax or "
        "build failure); a missing or crashing tool alone does not block.",
        "paths": "The changed files that were checked.",
        "checks": "Each check's `name`, `status` (`passed`, `failed`, `error`, `skipped`, "
        "`timed_out`) and number of `failures`.",
        "failures": "Structured failures, at most 100: `kind`, `tool`, `message`, and where "
        "known `file`, `line`, `test` (e.g. a pytest node id) and `code` (a rule id).",
        "report": "The compact text the model is shown: the verdict (`not verified: WHY` when "
        "checks were skipped), then a line per check and a line per failure.",
    },
    "changes_ready": {
        "checkpoint_id": "The newest checkpoint; the change runs from the session's first "
        "checkpoint (or its last applied one) up to it.",
        "files": "Every changed path with its status, as in `checkpoint_created`.",
        "flagged": "Sensitive paths among them (CI workflows, `Makefile`, `conftest.py`, "
        "editor settings, new executables...), each as `path: reason`.",
        "summary": "The change in one line, e.g. `3 files: 2 modified, 1 added`.",
    },
    "changes_applied": {
        "outcome": "`applied`: written to the checkout; `conflicts`: the checkout changed "
        "under the session in the same places, nothing written; `refused`: the change holds "
        "something never applied (a symlink out of the checkout...) or something the security "
        "gate blocks (a secret, a high-severity finding), nothing written; "
        "`discarded`: the person threw the change away.",
        "checkpoint_id": "The checkpoint the change ran up to.",
        "written": "Paths written (added, modified, renamed to).",
        "deleted": "Paths deleted.",
        "merged": "Paths the person had also changed; both edits were merged.",
        "problems": "When nothing was applied: each conflict or refused path as `path: reason`, "
        "or each security finding as `file:line: what`, then how to accept them.",
        "accepted_findings": "The security findings (`file:line: what`) the person accepted to "
        "have the change applied anyway (`kestrel apply --accept-security-findings`).",
    },
    "budget_warning": {
        "budget": "Which budget; `cost_per_day` and `tokens_per_day` count every session since "
        "local midnight.",
        "used": "How much is spent (turns, tokens, US dollars or seconds).",
        "limit": "The budget's limit, in the same unit.",
    },
    "budget_notice": {
        "budget": "Which budget, as in `budget_warning`.",
        "enforced": "False when the budget cannot stop the session (a cost budget on a model "
        "with no known price); true when it counts estimated tokens.",
        "detail": "The sentence a frontend shows.",
    },
    "loop_detected": {
        "pattern": "`repeat`: the same call again and again; `alternate`: two calls in turn; "
        "`oscillate`: failing results alternating between two states (after a recovery).",
        "action": "`warn`: the model is told; `stop`: the session finishes with reason `loop`.",
        "detail": "What repeats, in words.",
    },
    "loop_recovered": {
        "pattern": "What was caught; `oscillate` for two failing states in turn.",
        "detail": "What was detected, in words.",
        "to_seq": "The `model_request_started` the conversation went back to; that turn is "
        "asked again.",
        "checkpoint_id": "The checkpoint the files were restored to, or null when they were left "
        "as they were (no checkpoint recorded them).",
        "note": "The text the model is given after the rewound conversation.",
    },
    "hook_ran": {
        "hook_event": "The hook event, such as `PreToolUse` or `Stop`.",
        "command": "The hook's command line.",
        "outcome": "`ok`, `block` (exit 2), `error` (another exit code or bad output), `timeout` "
        "or `crash` (could not start, or killed by a signal).",
        "exit_code": "The command's exit code, when it exited.",
        "duration_ms": "How long it ran.",
        "call_id": "The tool call it ran for, for tool events.",
        "message": "What it wrote to stderr, trimmed.",
    },
    "context_added": {
        "source": "Where the text came from, such as `SessionStart hook`.",
        "text": "The text the model sees.",
        "usage": "What the first context's reranking call spent (`context.rerank`); counted in "
        "the session's totals, not as a turn.",
    },
    "context_compacted": {
        "message": "The user turn that now stands for the dropped turns: the goal and the "
        "person's latest request verbatim, the fast model's summary, the files edited and the "
        "calls that failed.",
        "kept": "How many of the newest messages stay as they were, after `message`.",
        "dropped": "How many messages `message` replaced.",
        "transcript": "The dropped turns as text (each tool output cut at 6,000 characters), "
        "for the person to see what was folded; the log holds them whole.",
        "moved": "Large tool outputs in the kept turns replaced by a reference to a file.",
        "tokens_before": "Estimated input tokens of the request before compaction.",
        "tokens_after": "Estimated input tokens after it.",
        "window_tokens": "The context window it was fitted to.",
        "usage": "What the summarising call spent; counted in the session's totals, not as a turn.",
    },
    "MovedOutput": {
        "call_id": "The call whose output moved.",
        "path": "The file holding the whole output; `read_file` can read it.",
        "content": "What the conversation holds instead: the reference and the output's start.",
    },
    "prompt_blocked": {"reason": "Why the hook refused the message."},
    "injection_flagged": {
        "call_id": "The call whose result was flagged.",
        "name": "The tool's name.",
        "findings": "Each finding: its kind, its line in the result and the text, trimmed.",
    },
    "todo_updated": {
        "items": "The whole task list, in order; it replaces the previous one.",
        "source": "`model`: a `todo` call wrote it; `plan`: the steps of an approved plan.",
        "call_id": "The `todo` call that wrote it; null when an approved plan did.",
    },
    "plan_proposed": {
        "plan_id": "The plan's id; `kestrel plan approve` and `reject` may name it.",
        "summary": "The approach, in the model's words.",
        "steps": "The steps, as proposed.",
        "call_id": "The `propose_plan` call that proposed it.",
    },
    "plan_decided": {
        "plan_id": "The plan decided on.",
        "decision": "`approved` or `rejected`.",
        "steps": "The approved steps, with the person's edits; empty for a rejection.",
        "edited": "True when the person changed the plan before approving it.",
        "reason": "Why the person rejected it; the model is told.",
        "permission_mode": "The mode the session continues in after an approval; null for a "
        "rejection (the session stays in plan mode).",
    },
    "subagent_started": {
        "call_id": "The parent's `task` call that started the subagent.",
        "child_session_id": "The subagent's own session in the same store; its "
        "`session_started` names this session as its parent.",
        "agent": "The subagent definition's name, such as `explore`.",
        "description": "The short description the model gave the task.",
        "model": "The model that answers first, as `provider:model-id`.",
        "role": "The role whose models answer the subagent; null when its definition names a "
        "model.",
    },
    "subagent_finished": {
        "call_id": "The parent's `task` call.",
        "child_session_id": "The subagent's session.",
        "agent": "The subagent definition's name.",
        "reason": "Why the subagent's session stopped, as in `session_finished`.",
        "detail": "More about the reason, in words.",
        "totals": "What the subagent spent; it is added to the parent's totals, so it counts "
        "toward the parent's budgets.",
    },
    "pull_request_opened": {
        "url": "The pull request's page.",
        "number": "Its number on the forge.",
        "repository": "`owner/name` on the forge.",
        "branch": "The branch pushed, named from the task.",
        "base": "The branch it asks to be merged into.",
        "commit": "The commit pushed: the change on top of the checkout's HEAD.",
        "draft": "True when opened as a draft.",
    },
    "pull_request_synced": {
        "number": "The pull request.",
        "comments": "The forge's ids of the review comments sent to the model as a follow-up.",
        "failed_checks": "The names of the failed checks sent with them.",
        "commit": "The commit pushed after the follow-up; empty when nothing was pushed.",
        "replied": "The review comments answered on the forge.",
        "proposed": "Review comments that state a convention, proposed as memory entries; "
        "`kestrel memory accept ID` keeps them.",
    },
    "error": {
        "error_kind": "The error's type, such as `AuthenticationFailed`.",
        "message": "The error's message.",
        "recoverable": "True when the session goes on despite it.",
    },
    "session_finished": {
        "reason": "Why: `done` (the model finished), `error`, `budget`, `loop`, `cancelled`, or "
        "`hook` (a hook stopped the session or blocked its prompt), `unverified` "
        "(verification still failed after `verify.max_rounds` rounds of fixes), or `plan` (a "
        "plan was proposed and waits for the person's decision).",
        "detail": "More about the reason, in words.",
        "final_text": "The model's last text, when it finished on its own.",
        "totals": "What the session spent, over all its runs.",
        "day_cost_usd": "With a daily budget set: every session's spend since local midnight, "
        "in US dollars; otherwise null.",
        "day_tokens": "With a daily budget set: every session's tokens since local midnight; "
        "otherwise null.",
    },
    "TodoItem": {
        "id": "The item's id, unique in the list.",
        "text": "What to do, in one line.",
        "status": "`pending`, `in_progress` (at most one item) or `done`.",
    },
    "PlanStep": {
        "id": "The step's id, unique in the plan.",
        "title": "What the step does.",
        "files": "Files the step will change.",
        "checks": "Commands or tests that show the step worked.",
        "depends_on": "Ids of the steps that must be done first.",
    },
    "CheckOutcome": {
        "name": "The check, e.g. `syntax`, `ruff`, `mypy`, `pytest`.",
        "status": "`passed`, `failed`, `error` (the tool could not run), `skipped` or `timed_out`.",
        "failures": "How many failures it reported.",
    },
    "VerifyFailure": {
        "kind": "`test`, `lint`, `type`, `syntax`, `build`, `security` (a secret or risky code "
        "the change added) or `error`.",
        "tool": "The tool that reported it.",
        "message": "What it said, trimmed.",
        "file": "The file, relative to the workspace, when known.",
        "line": "The line, when known.",
        "test": "The test id, e.g. `tests/test_x.py::test_y`, for test failures.",
        "code": "The rule or error code, e.g. `F401`, `TS2322`.",
    },
    "ChangedFile": {
        "path": "The path, relative to the working directory.",
        "status": "`A` added, `M` modified, `D` deleted, `R` renamed.",
        "old_path": "The path before a rename; null otherwise.",
    },
    "Limits": {
        "max_turns": "Most model calls; null for no limit.",
        "max_tokens": "Most tokens, input and output; null for no limit.",
        "max_cost_usd": "Most US dollars; null for no limit.",
        "max_wall_s": "Most wall-clock seconds; null for no limit.",
    },
    "Totals": {
        "turns": "Model calls.",
        "tool_calls": "Tool calls.",
        "input_tokens": "Input tokens not read from or written to the cache.",
        "output_tokens": "Output tokens.",
        "cache_write_tokens": "Input tokens written to the prompt cache.",
        "cache_read_tokens": "Input tokens read from the prompt cache.",
        "cost_usd": "US dollars.",
        "wall_s": "Wall-clock seconds.",
        "tokens_estimated": "True when some call's server reported no usage, so the token "
        "counts include Kestrel's estimate.",
        "cost_known": "False when some call's model has no price, so `cost_usd` is a lower bound "
        "(unknown when it is 0).",
    },
    "AssistantTurn": {
        "role": 'Always `"assistant"`.',
        "text": "The reply's text.",
        "tool_calls": "The tool calls, in the order the model wrote them.",
    },
    "ToolCall": {
        "id": "The call's id, unique in the session.",
        "name": "The tool's name.",
        "arguments": "The arguments as the JSON text the model wrote (it may be invalid).",
    },
    "Usage": {
        "model": "The model that served the call.",
        "input_tokens": "Input tokens not read from or written to the cache.",
        "output_tokens": "Output tokens.",
        "cache_write_tokens": "Input tokens written to the prompt cache.",
        "cache_read_tokens": "Input tokens read from the prompt cache.",
        "cost_usd": "US dollars, from the pricing table.",
        "latency_ms": "Milliseconds from request to completion.",
        "priced": "False when the model is missing from the pricing table, so `cost_usd` is "
        "a lower bound.",
        "tokens_reported": "False when the server reported no usage, so the token counts are "
        "Kestrel's own estimate.",
    },
}

TEMPLATE = Path(__file__).resolve().parent / "events_doc.template.md"
"""The hand-written parts of the page; `{{name}}` marks where a generated part goes."""

_JSON_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def event_classes() -> list[type]:
    """Every event dataclass, in the order of the `Event` union."""
    union = typing.get_args(Event)[0]
    return list(typing.get_args(union))


def shared_types() -> list[type]:
    """Dataclasses that event fields hold, found by walking the field types."""
    found: list[type] = []
    pending = [hint for cls in event_classes() for hint in _hints(cls).values()]
    while pending:
        hint = pending.pop(0)
        if dataclasses.is_dataclass(hint) and isinstance(hint, type):
            if hint not in found:
                found.append(hint)
                pending.extend(_hints(hint).values())
        else:
            pending.extend(typing.get_args(hint))
    return sorted(found, key=lambda cls: cls.__name__)


def tag_of(cls: type) -> str:
    """The value of an event class's `type` field."""
    tag = next(f.default for f in dataclasses.fields(cls) if f.name == "type")
    assert isinstance(tag, str)
    return tag


def _hints(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def type_name(hint: Any) -> str:
    """A field's type as a JSON reader sees it."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is type(None):
        return "null"
    if hint in _JSON_NAMES:
        return _JSON_NAMES[hint]
    if hint is Any:
        return "any JSON"
    if origin is typing.Literal:
        return " or ".join(f'`"{arg}"`' for arg in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(arg) for arg in args)
    if origin is tuple:
        return f"array of {type_name(args[0])}"
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return f"[`{hint.__name__}`](#{hint.__name__.lower()})"
    raise TypeError(f"no JSON name for {hint!r}; teach type_name about it")


def default_text(field: dataclasses.Field[Any]) -> str:
    """A field's default as JSON, or `required`."""
    if field.default is not dataclasses.MISSING:
        value = [] if field.default == () else field.default
        return f"`{json.dumps(value)}`"
    if field.default_factory is not dataclasses.MISSING:
        return "all defaults"
    return "required"


def field_table(cls: type, key: str) -> str:
    """The markdown table of `cls`'s fields, with meanings from `MEANING[key]`."""
    meanings = MEANING.get(key, {})
    hints = _hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.name != "type"]
    missing = [n for n in names if n not in meanings]
    stale = [n for n in meanings if n not in names]
    if missing or stale:
        raise KeyError(f"{key}: describe {missing} and drop {stale} in MEANING")
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for field in dataclasses.fields(cls):
        if field.name != "type":
            row = (f"`{field.name}`", type_name(hints[field.name]), default_text(field))
            rows.append("| " + " | ".join((*row, meanings[field.name])) + " |")
    return "\n".join(rows)


def event_sections() -> str:
    """One section per event type: when it is emitted, then its fields."""
    sections = []
    for cls in event_classes():
        tag = tag_of(cls)
        if tag not in WHEN:
            raise KeyError(f"{tag}: say when it is emitted in WHEN")
        table = field_table(cls, tag) if len(dataclasses.fields(cls)) > 1 else "No fields."
        where = f"Python: `kestrel.protocol.events.{cls.__name__}`."
        sections.append(f"### `{tag}`\n\n{WHEN[tag]} {where}\n\n{table}\n")
    return "\n".join(sections)


def overview() -> str:
    """A table of every event type and when it is emitted."""
    rows = ["| type | emitted |", "|---|---|"]
    for cls in event_classes():
        tag = tag_of(cls)
        rows.append(f"| [`{tag}`](#{tag}) | {WHEN[tag]} |")
    return "\n".join(rows)


def shared_sections() -> str:
    """One section per shared type."""
    return "\n".join(
        f"### `{cls.__name__}`\n\n{cls.__doc__}\n\n{field_table(cls, cls.__name__)}\n"
        for cls in shared_types()
    )


def render() -> str:
    """The whole of docs/events.md."""
    parts = {
        "version": str(SCHEMA_VERSION),
        "overview": overview(),
        "events": event_sections(),
        "shared": shared_sections(),
    }
    text = TEMPLATE.read_text(encoding="utf-8")
    for name, part in parts.items():
        text = text.replace("{{" + name + "}}", part)
    return text


if __name__ == "__main__":
    sys.stdout.write(render())
