"""How much of a long session's input is a prompt-cache read, under Kestrel's cache breakpoints.

Runs a real 40-step session (the real loop, real tools over a copy of this repository: file
reads, greps, listings, edits and shell commands) whose model is scripted, and records every
request the loop builds. Each request is turned into the Anthropic Messages API body by the
adapter's own `build_params`, breakpoints included, and fed to a prompt-cache simulator:

- a request's blocks are hashed in the order the API caches them (tools, system, messages);
- a breakpoint writes the prefix that ends at it, if it holds at least `--min-tokens` tokens;
- a request reads the longest prefix that ends at a block boundary at most 20 blocks before one
  of its breakpoints and that an earlier request wrote, within the cache lifetime (`--ttl-s`,
  refreshed by every read);
- tokens are counted with Kestrel's own estimate (`kestrel.context.budget.estimate_tokens`).

It prints the share of input tokens read from the cache (goal: at least 80%), what that does to
the session's price on the main model, and what a fast-role model saves on the calls that role
is for (a session title and a summary of older turns, which the loop does not make yet: their
sizes are taken from this session). The model is scripted: no figure here is a real model's
behaviour, only the shape of the requests Kestrel sends.

    python bench/cache_share.py [--gap-s 15] [--ttl-s 300]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import platform
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kestrel.agent.loop import AgentLoop, LoopConfig
from kestrel.agent.ports import DenyingApprover, OnRetry, OnSwitch, ToolEnvironment
from kestrel.agent.prompt import build_system_prompt
from kestrel.agent.session import start_session
from kestrel.app import streamer_for
from kestrel.context.budget import estimate_tokens
from kestrel.models.anthropic import build_params
from kestrel.models.pricing import find_price
from kestrel.models.scripted import ScriptedProvider, ScriptedTurn, call, say
from kestrel.protocol.events import Limits, ModelRole, ToolFinished
from kestrel.protocol.messages import AssistantTurn, ModelRequest, StreamPart, Usage
from kestrel.sandbox.local import LocalExecutor
from kestrel.store.memory import MemoryStore
from kestrel.tools.code import CodeIndex
from kestrel.tools.registry import ToolRegistry, code_tools, default_tools
from kestrel.tools.verify import Verify

REPO = Path(__file__).resolve().parents[1]
MAIN_MODEL = "claude-sonnet-4-6"
FAST_MODEL = "claude-haiku-4-5"
LOOKBACK_BLOCKS = 20
TASK = (
    "Retries give up after five attempts whatever the provider; make the number of attempts and "
    "the longest wait configurable in settings ([models] table), wire them into the router, and "
    "document both settings."
)


def script() -> list[ScriptedTurn]:
    """39 steps that call tools the way a coding agent explores and edits, then a final answer."""
    retry = "src/kestrel/models/retry.py"
    return [
        call("list_files", "I'll start by looking at the layout of the project."),
        call(
            "grep", "Let me find where the retry policy is defined and used.", pattern="RetryPolicy"
        ),
        call("read_file", "The policy lives in models/retry.py; reading it.", path=retry),
        call("grep", "Where is the maximum delay used?", pattern="max_delay_s|max_attempts"),
        call(
            "read_file",
            "Now the composition root, where providers are built.",
            path="src/kestrel/app.py",
        ),
        call(
            "read_file",
            "And the router that wraps each role's providers.",
            path="src/kestrel/models/router.py",
        ),
        call(
            "read_file",
            "The settings object, to see how tables are declared.",
            path="src/kestrel/settings.py",
        ),
        call(
            "grep",
            "How are other tables validated?",
            pattern="class .*Settings\\(_Table\\)",
            path="src/kestrel",
        ),
        call(
            "read_file",
            "Reading the configuration docs I will need to extend.",
            path="docs/configuration.md",
        ),
        call("list_files", "Which tests cover settings?", path="src", pattern="*.py"),
        call(
            "grep",
            "Checking for existing retry settings.",
            pattern="retry",
            path="src/kestrel/settings.py",
        ),
        call(
            "read_file",
            "The Anthropic adapter, to confirm it does not retry on its own.",
            path="src/kestrel/models/anthropic.py",
            limit=120,
        ),
        call(
            "grep",
            "Any other place that builds a RetryPolicy?",
            pattern="RetryPolicy\\(",
            path="src",
        ),
        call(
            "bash",
            "How big are these modules?",
            command="wc -l src/kestrel/models/*.py src/kestrel/settings.py",
        ),
        call(
            "read_file",
            "The OpenAI adapter's client setup.",
            path="src/kestrel/models/openai_compat.py",
            offset=60,
            limit=80,
        ),
        call(
            "edit_file",
            "Adding the two settings to the models table.",
            path="src/kestrel/settings.py",
            old_str="    failover_after: PositiveInt = 1\n",
            new_str="    failover_after: PositiveInt = 1\n    max_attempts: PositiveInt = 5\n"
            "    max_delay_s: PositiveFloat = 60.0\n",
        ),
        call(
            "read_file",
            "Checking the edit in context.",
            path="src/kestrel/settings.py",
            offset=180,
            limit=80,
        ),
        call(
            "grep",
            "Where does the app build the failover policy?",
            pattern="FailoverPolicy\\(",
            path="src",
        ),
        call(
            "edit_file",
            "Passing the settings into the retry policy.",
            path="src/kestrel/app.py",
            old_str="retry=policy or RetryPolicy(),",
            new_str="retry=policy or RetryPolicy(max_attempts=settings.models.max_attempts, "
            "max_delay_s=settings.models.max_delay_s),",
        ),
        call(
            "bash",
            "Does it still import?",
            command="python3 -c 'import ast; ast.parse(open(\"src/kestrel/app.py\").read())'",
        ),
        call(
            "grep", "Are there docs for the models table yet?", pattern="\\[models\\]", path="docs"
        ),
        call(
            "read_file",
            "The provider docs mention retries; reading them.",
            path="docs/providers.md",
        ),
        call("grep", "Which docs talk about retry-after?", pattern="retry-after", path="docs"),
        call(
            "read_file",
            "Looking at the HTTP error mapping for the rate-limit path.",
            path="src/kestrel/models/http_errors.py",
        ),
        call("read_file", "And the typed errors.", path="src/kestrel/protocol/errors.py"),
        call("grep", "How is jitter handled?", pattern="jitter", path="src"),
        call(
            "read_file",
            "Re-reading the retry loop around the backoff.",
            path=retry,
            offset=40,
            limit=60,
        ),
        call(
            "edit_file",
            "Documenting the settings.",
            path="docs/configuration.md",
            old_str="### `[tools]`\n",
            new_str="### `[models]` retries\n\n"
            "| key | type | default | meaning |\n|---|---|---|---|\n"
            "| `models.max_attempts` | integer > 0 | `5` | Attempts per model. |\n"
            "| `models.max_delay_s` | number > 0 | `60` | Longest wait between attempts. |\n\n"
            "### `[tools]`\n",
        ),
        call(
            "grep",
            "Confirming the new rows are there.",
            pattern="max_attempts",
            path="docs/configuration.md",
        ),
        call("bash", "Listing what changed by size.", command="ls -la src/kestrel/models docs"),
        call(
            "read_file",
            "The events reference, in case retries are described there.",
            path="docs/events.md",
            limit=150,
        ),
        call(
            "grep",
            "Does the loop say anything about attempts?",
            pattern="attempt",
            path="src/kestrel/agent",
        ),
        call(
            "read_file",
            "The loop's model step, to be sure retries are still logged.",
            path="src/kestrel/agent/loop.py",
            offset=230,
            limit=90,
        ),
        call(
            "grep",
            "Any test helpers building settings by hand?",
            pattern="load_settings",
            path="src",
        ),
        call(
            "read_file",
            "Checking how flags map to settings.",
            path="src/kestrel/settings.py",
            offset=300,
            limit=80,
        ),
        call(
            "bash",
            "Quick syntax check of the edited modules.",
            command="python3 -m py_compile src/kestrel/settings.py src/kestrel/app.py && echo ok",
        ),
        call(
            "grep", "Last look for hard-coded attempt counts.", pattern="max_attempts=", path="src"
        ),
        call(
            "read_file",
            "Final read of the documented table.",
            path="docs/configuration.md",
            offset=60,
            limit=60,
        ),
        call(
            "bash",
            "Summary of the edits.",
            command="grep -n 'max_attempts\\|max_delay_s' -r src docs | head -20",
        ),
        say(
            "Retries are now configurable: `models.max_attempts` and `models.max_delay_s` in "
            "settings feed the retry policy the router uses, and docs/configuration.md lists both."
        ),
    ]


class Recorder:
    """A model streamer that answers with the scripted model and keeps every request."""

    def __init__(self, provider: ScriptedProvider) -> None:
        self.inner = streamer_for(provider)
        self.requests: list[ModelRequest] = []

    def __call__(
        self, request: ModelRequest, *, role: ModelRole, on_retry: OnRetry, on_switch: OnSwitch
    ) -> AsyncIterator[StreamPart]:
        self.requests.append(request)
        return self.inner(request, role=role, on_retry=on_retry, on_switch=on_switch)


def copy_project(workdir: Path) -> Path:
    root = workdir / "kestrel"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "src", root / "src", ignore=ignore)
    shutil.copytree(REPO / "docs", root / "docs")
    for name in ("README.md", "pyproject.toml"):
        shutil.copy2(REPO / name, root / name)
    return root


async def run_session(root: Path) -> tuple[list[ModelRequest], list[ToolFinished]]:
    """Run the scripted session over `root`; return the requests and the tool results."""
    store = MemoryStore()
    session_id = start_session(
        store,
        task=TASK,
        cwd=root,
        model=f"anthropic:{MAIN_MODEL}",
        permission_mode="bypass",
        limits=Limits(max_turns=100),
        version="bench",
    )
    # The tools the product offers (app.build_loop): the code tools' index opens only if used.
    tools = [*default_tools(), Verify(), *code_tools(CodeIndex(lambda path: None))]  # type: ignore[arg-type,return-value]
    recorder = Recorder(ScriptedProvider(script()))
    system = build_system_prompt(cwd=root, memory=[], today="2026-11-22")
    loop = AgentLoop(
        store=store,
        session_id=session_id,
        streamer=recorder,
        tools=ToolRegistry(tools),
        environment=ToolEnvironment(
            root=root, executor=LocalExecutor(), artifacts_dir=root.parent / "artifacts"
        ),
        approver=DenyingApprover(),
        config=LoopConfig(system_prompt=system, warn_after=1_000, stop_after=1_000),
    )
    finished = await loop.run()
    if finished.reason != "done":
        raise SystemExit(f"the scripted session did not finish: {finished}")
    results = [r.event for r in store.read(session_id) if isinstance(r.event, ToolFinished)]
    return recorder.requests, results


@dataclass(frozen=True, slots=True)
class Block:
    """One cacheable unit of a request body, in cache order."""

    digest: str
    """Hash of the whole prefix that ends with this block."""
    tokens: int
    breakpoint: bool


def _block_text(block: dict[str, Any]) -> str:
    if block.get("type") == "text":
        return str(block["text"])
    if block.get("type") == "tool_result":
        return str(block["content"])
    if block.get("type") == "tool_use":
        return str(block["name"]) + json.dumps(block["input"])
    return json.dumps(block)  # A tool definition: its name, description and schema.


def blocks_of(body: dict[str, Any]) -> list[Block]:
    """The body's blocks in the order the API caches them: tools, system, then messages."""
    items: list[tuple[str, dict[str, Any]]] = [("tool", t) for t in body.get("tools", [])]
    items += [("system", b) for b in body.get("system", [])]
    for index, message in enumerate(body["messages"]):
        items += [(f"{message['role']}#{index}", b) for b in message["content"]]
    out, running = [], hashlib.sha256()
    for where, block in items:
        plain = {k: v for k, v in block.items() if k != "cache_control"}
        running.update(where.encode() + json.dumps(plain, sort_keys=True).encode())
        tokens = estimate_tokens(_block_text(plain))
        out.append(Block(running.copy().hexdigest(), tokens, "cache_control" in block))
    return out


@dataclass(slots=True)
class CacheSimulator:
    """Anthropic's prompt cache as documented: prefixes written at breakpoints, read by prefix."""

    ttl_s: float
    min_tokens: int
    expiry: dict[str, float] = field(default_factory=dict)

    def send(self, blocks: Sequence[Block], now: float) -> Usage:
        """The usage of one request sent at `now`: cache read, cache write and the rest."""
        ends, total = [], 0
        for block in blocks:
            total += block.tokens
            ends.append(total)
        marks = [i for i, b in enumerate(blocks) if b.breakpoint]
        read, hit = 0, None
        for mark in marks:
            for j in range(mark, max(-1, mark - LOOKBACK_BLOCKS), -1):
                if self.expiry.get(blocks[j].digest, -1.0) >= now and ends[j] > read:
                    read, hit = ends[j], blocks[j].digest
                    break
        if hit is not None:
            self.expiry[hit] = now + self.ttl_s
        written = 0
        for mark in marks:
            if ends[mark] >= self.min_tokens:
                self.expiry[blocks[mark].digest] = now + self.ttl_s
                written = max(written, ends[mark] - read)
        return Usage(
            model=MAIN_MODEL,
            input_tokens=total - read - written,
            cache_read_tokens=read,
            cache_write_tokens=written,
        )


def cost(model: str, uncached: int, write: int, read: int, output: int) -> float:
    price = find_price(model)
    assert price is not None, model
    return (
        uncached * price.input
        + write * price.cache_write
        + read * price.cache_read
        + output * price.output
    ) / 1_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gap-s", type=float, default=15.0, help="seconds between requests")
    parser.add_argument("--ttl-s", type=float, default=300.0, help="cache lifetime (5 minutes)")
    parser.add_argument("--min-tokens", type=int, default=1024, help="smallest cacheable prefix")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        requests, results = asyncio.run(run_session(copy_project(Path(tmp))))
    simulator = CacheSimulator(ttl_s=args.ttl_s, min_tokens=args.min_tokens)
    usages = [
        simulator.send(blocks_of(build_params(MAIN_MODEL, request)), step * args.gap_s)
        for step, request in enumerate(requests)
    ]
    read = sum(u.cache_read_tokens for u in usages)
    written = sum(u.cache_write_tokens for u in usages)
    total = sum(u.total_input_tokens for u in usages)
    uncached = total - read - written
    replies = [m for m in requests[-1].messages if isinstance(m, AssistantTurn)]
    output = sum(
        estimate_tokens(m.text + "".join(c.arguments for c in m.tool_calls)) for m in replies
    )
    output += estimate_tokens(str(script()[-1].text))  # The final answer is in no request.
    errors = sum(1 for r in results if r.is_error)

    print(f"machine: {platform.machine()}, {platform.system()}, Python {platform.python_version()}")
    print(f"session: {len(requests)} requests, {len(results)} tool results ({errors} errors)")
    sizes = sorted(estimate_tokens(r.content) for r in results)
    print(f"tool results: median {sizes[len(sizes) // 2]} tokens, largest {sizes[-1]}")
    first = usages[0].total_input_tokens
    print(
        f"input tokens: {total:,} (first request {first:,}, last {usages[-1].total_input_tokens:,})"
    )
    print(
        f"  cache reads  {read:>9,}  {read / total:6.1%}   <- cacheable prefix share (goal >= 80%)"
    )
    print(f"  cache writes {written:>9,}  {written / total:6.1%}")
    print(f"  uncached     {uncached:>9,}  {uncached / total:6.1%}")
    cached_cost = cost(MAIN_MODEL, uncached, written, read, output)
    plain_cost = cost(MAIN_MODEL, total, 0, 0, output)
    print(
        f"session on {MAIN_MODEL}: ${cached_cost:.3f} with caching, ${plain_cost:.3f} without "
        f"({cached_cost / plain_cost - 1:+.0%})"
    )

    # The fast role's calls, sized from this session: a title from the task and the first
    # reply, and a summary of the conversation so far as of step 30 (what compaction sends).
    title_in = estimate_tokens(TASK) + 200
    summary_in = usages[min(29, len(usages) - 1)].total_input_tokens
    calls = [("title", title_in, 20), ("summary of older turns", summary_in, 1_500)]
    print(f"fast role ({FAST_MODEL} instead of {MAIN_MODEL}); calls the loop does not make yet:")
    main_total = fast_total = 0.0
    for name, tokens_in, tokens_out in calls:
        on_main = cost(MAIN_MODEL, tokens_in, 0, 0, tokens_out)
        on_fast = cost(FAST_MODEL, tokens_in, 0, 0, tokens_out)
        main_total, fast_total = main_total + on_main, fast_total + on_fast
        print(
            f"  {name}: {tokens_in:,} in + {tokens_out:,} out tokens: ${on_main:.4f} on main, "
            f"${on_fast:.4f} on fast"
        )
    moved = sum(i + o for _, i, o in calls)
    print(
        f"  {moved:,} tokens moved off the main model, saving ${main_total - fast_total:.4f} "
        f"({1 - fast_total / main_total:.0%} of those calls' cost)"
    )


if __name__ == "__main__":
    main()
