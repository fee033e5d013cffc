"""The composition root: the only place that picks implementations and wires them together."""

from __future__ import annotations

import datetime as dt
import difflib
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from kestrel.agent.agent_defs import definition_dirs, load_definitions
from kestrel.agent.daily import DailyBudget, DailyLimits
from kestrel.agent.loop import AgentLoop, LoopConfig
from kestrel.agent.ports import Approver, OnRetry, OnSwitch, ToolEnvironment
from kestrel.agent.prompt import MemoryFile, build_system_prompt, find_memory_files, load_memory
from kestrel.agent.subagents import SubagentRunner
from kestrel.agent.task_tool import context_note, task_tool
from kestrel.app_mcp import mcp_setup
from kestrel.app_redis import with_response_cache
from kestrel.app_sandbox import BYPASS_NEEDS_SANDBOX, outside_reach
from kestrel.app_sandbox import check_sandbox as check_sandbox
from kestrel.app_sandbox import data_dir as data_dir
from kestrel.app_sandbox import executor_for as executor_for
from kestrel.app_sandbox import masked_data as masked_data
from kestrel.app_share import GitCheckpointer as GitCheckpointer
from kestrel.app_share import checkpointer_for as checkpointer_for
from kestrel.app_store import open_store as open_store
from kestrel.app_store import store_output as store_output
from kestrel.app_store import version as version
from kestrel.context.embed import default_embedder
from kestrel.context.engine import ContextEngine
from kestrel.context.learned import default_definition_ranker, default_ranker
from kestrel.context.model import SearchResult
from kestrel.gitsafe import GitUnavailable, NotARepository, UnsafeRepository, run_git
from kestrel.models.base import Provider
from kestrel.models.endpoint import EndpointChoices
from kestrel.models.retry import RetryPolicy
from kestrel.models.router import ROLES, Candidate, FailoverPolicy, FailoverProvider, ModelRouter
from kestrel.models.scripted import ScriptedProvider
from kestrel.policy.gate import PermissionGate
from kestrel.policy.hooks import HookCommand, HookMatcher, HookRunner
from kestrel.policy.rules import RuleSet
from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events import ErrorOccurred, ModelRole, PermissionMode
from kestrel.protocol.messages import ModelRequest, StreamPart
from kestrel.sandbox.base import Executor
from kestrel.sandbox.bwrap import BwrapExecutor
from kestrel.sandbox.probe import probe
from kestrel.settings import API_KEY_ENV, Settings
from kestrel.store.base import EventStore
from kestrel.tools.code import CodeIndex
from kestrel.tools.plan import ProposePlan
from kestrel.tools.registry import ToolRegistry, code_tools, default_tools
from kestrel.tools.subjects import COMPAT_NAMES
from kestrel.tools.todo import Todo
from kestrel.tools.verify import Verify
from kestrel.workspace.handoff import baseline_from
from kestrel.workspace.verify.session import SessionVerifier

PROVIDERS = ("anthropic", "openai", "scripted")


def build_provider(
    spec: str,
    *,
    base_url: str | None = None,
    cwd: Path | None = None,
    endpoint: EndpointChoices | None = None,
) -> Provider:
    """A provider from `provider:model` (`anthropic:claude-sonnet-4-5`, `scripted:PATH`, ...)."""
    name, sep, model = spec.partition(":")
    if not sep or name not in PROVIDERS or not model:
        raise ConfigError(
            f"model {spec!r}: expected PROVIDER:MODEL with PROVIDER one of {', '.join(PROVIDERS)}"
            " (e.g. anthropic:claude-sonnet-4-5, openai:gpt-4.1, scripted:script.json)"
        )
    if name == "scripted":
        path = Path(model).expanduser()
        return ScriptedProvider.from_file(path if path.is_absolute() or cwd is None else cwd / path)
    # Each SDK takes about a second to import: load only the one this model needs, when needed.
    if name == "anthropic":
        from kestrel.models.anthropic import AnthropicProvider

        return AnthropicProvider(model, base_url=base_url)
    from kestrel.models.openai_compat import OpenAICompatProvider

    return OpenAICompatProvider(model, base_url=base_url, endpoint=endpoint)


def endpoint_for(settings: Settings, base_url: str | None) -> EndpointChoices | None:
    """The `[endpoint]` choices for a model reached at `base_url`: they describe the server at
    the top-level `base_url`; a model with an endpoint of its own is detected instead."""
    return settings.endpoint.choices() if base_url == settings.base_url else None


def check_credentials(settings: Settings, env: Mapping[str, str]) -> None:
    """Fail before a session starts when one of its models has no API key to use."""
    for role in ROLES:
        for choice in settings.role_models(role):
            variable = API_KEY_ENV.get(choice.provider)
            local = choice.base_url or (choice.provider == "openai" and env.get("OPENAI_BASE_URL"))
            if variable is None or env.get(variable) or local:
                continue
            where = "" if choice.model == settings.model else f" (listed for the {role} role)"
            raise ConfigError(
                f"{variable} is not set: export it to use {choice.model}{where}, or choose "
                "another model with --model (e.g. openai:MODEL with KESTREL_BASE_URL for a "
                "local server, or scripted:script.json, which needs no key)"
            )


def router_for(settings: Settings, cwd: Path, policy: RetryPolicy | None = None) -> ModelRouter:
    """Each role's models from settings, in failover order; a model listed twice is one client."""
    failover = FailoverPolicy(
        retry=policy or RetryPolicy(), switch_after=settings.models.failover_after
    )
    built: dict[tuple[str, str | None], Provider] = {}
    chains: dict[ModelRole, FailoverProvider] = {}
    for role in ROLES:
        candidates = []
        for choice in settings.role_models(role):
            key = (choice.model, choice.base_url)
            if key not in built:
                endpoint = endpoint_for(settings, choice.base_url)
                built[key] = build_provider(
                    choice.model, base_url=choice.base_url, cwd=cwd, endpoint=endpoint
                )
            candidates.append(Candidate(choice.model, built[key]))
        chains[role] = FailoverProvider(candidates, policy=failover)
    return ModelRouter(chains)


def streamer_for(provider: Provider, policy: RetryPolicy | None = None) -> _Streamer:
    """A model streamer that answers every role with `provider`, retrying transient failures."""
    chain = FailoverProvider(
        [Candidate(provider.model, provider)], policy=FailoverPolicy(retry=policy or RetryPolicy())
    )
    return _Streamer(ModelRouter({"main": chain}))


def routed_streamer(router: ModelRouter) -> _Streamer:
    """A model streamer that sends each step to its role's models, failing over in order."""
    return _Streamer(router)


@dataclass(frozen=True, slots=True)
class _Streamer:
    router: ModelRouter

    def __call__(
        self, request: ModelRequest, *, role: ModelRole, on_retry: OnRetry, on_switch: OnSwitch
    ) -> AsyncIterator[StreamPart]:
        chain = self.router.for_role(role)
        return chain.stream_observed(request, on_retry=on_retry, on_switch=on_switch)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopParts:
    """Collaborators a frontend chooses; everything else comes from settings."""

    approver: Approver
    provider: Provider | None = None
    executor: Executor | None = None
    permission_mode: PermissionMode | None = None
    checkpoints: bool = True


def build_loop(
    store: EventStore, session_id: str, settings: Settings, cwd: Path, parts: LoopParts
) -> AgentLoop:
    """An agent loop for an existing session, wired from settings."""
    router = (
        ModelRouter({"main": FailoverProvider([Candidate(parts.provider.model, parts.provider)])})
        if parts.provider
        else router_for(settings, cwd)
    )
    memory = load_memory(find_memory_files(cwd, user_config_dir=_user_config_dir()))
    system = build_system_prompt(cwd=cwd, memory=memory, today=dt.date.today().isoformat())
    executor = parts.executor or executor_for(settings, cwd, session_id)
    timeout = settings.verify.timeout_s
    code_index = CodeIndex(_open_index)
    own_tools = [
        *default_tools(),
        Verify(timeout_s=timeout),
        *code_tools(code_index),
        Todo(),
        ProposePlan(),
    ]
    subagents = subagent_runner(settings, cwd, memory, [t.name for t in own_tools])
    mcp = mcp_setup(settings, cwd, executor, session_id)
    tools = ToolRegistry([*own_tools, *mcp.tools, task_tool(subagents)])
    gate = policy_gate(settings, cwd, session_id, tools, executor)
    environment = ToolEnvironment(
        root=cwd,
        executor=executor,
        artifacts_dir=data_dir(settings) / "artifacts" / session_id,
        bash_timeout_s=settings.tools.bash_timeout_s,
        max_output_chars=settings.tools.max_output_chars,
    )
    config = LoopConfig(
        system_prompt=system,
        max_output_tokens=settings.max_output_tokens,
        warn_after=settings.loop_detection.warn_after,
        stop_after=settings.loop_detection.stop_after,
        oscillate_after=settings.loop_detection.oscillate_after,
        permission_mode=parts.permission_mode,
        model=settings.model,
        max_verify_rounds=settings.verify.max_rounds,
        role_models={} if parts.provider else router.first_models(),
        context_window=settings.compaction.window_tokens if settings.compaction.enabled else None,
        compact_at=settings.compaction.compact_at,
        keep_share=settings.compaction.keep_share,
        move_outputs_over=settings.compaction.move_outputs_over,
        turn_grace=settings.limits.turn_grace,
        reach_outside=outside_reach(settings),
        first_context_files=settings.context.first_context_files,
        rerank_candidates=settings.context.rerank_candidates if settings.context.rerank else 0,
    )
    # Checks run the project's own programs: on their own only where the sandbox holds them.
    # Elsewhere the session says, in the run and its summary, that its change went unverified.
    unconfined = None if gate.sandboxed else partial(why_unconfined, settings)
    checkpointer = checkpointer_for(settings, cwd, session_id) if parts.checkpoints else None
    # The security gate blames only what the change added: it compares with the checkpoints.
    baseline = (
        baseline_from(checkpointer.store, lambda: [r.event for r in store.read(session_id)])
        if checkpointer is not None
        else None
    )
    verifier = (
        SessionVerifier(executor, cwd, timeout_s=timeout, unconfined=unconfined, baseline=baseline)
        if settings.verify.enabled
        else None
    )
    loop = AgentLoop(
        store=store,
        session_id=session_id,
        streamer=with_response_cache(routed_streamer(router), router, session_id, settings),
        tools=tools,
        environment=environment,
        approver=parts.approver,
        config=config,
        checkpointer=checkpointer,
        gate=gate,
        verifier=verifier,
        daily=daily_budget(settings, store),
        output_store=partial(store_output, environment.artifacts_dir),
        code_search=partial(_search, code_index, cwd),
    )
    if (config.permission_mode or loop.state.permission_mode) == "bypass" and not gate.sandboxed:
        raise ConfigError(BYPASS_NEEDS_SANDBOX)
    for problem in mcp.problems:
        loop.emit(ErrorOccurred(error_kind="mcp_server", message=problem, recoverable=True))
    subagents.attach(loop)
    return loop


async def why_unconfined(settings: Settings) -> str:
    """Why a session's commands run outside the sandbox, for the person to read."""
    if settings.sandbox != "none":
        return "this session's commands run outside the sandbox"
    if not (await probe()).ok:
        return "the sandbox cannot start here (run `kestrel doctor`)"
    return "this session runs without the sandbox (sandbox = none)"


def subagent_runner(
    settings: Settings, cwd: Path, memory: list[MemoryFile], tool_names: list[str]
) -> SubagentRunner:
    """The subagents of a session: built-ins, then the user's and the repository's definitions
    (`agents/*.md` in the config directory, `.kestrel/agents/*.md`); a bad file is a
    `ConfigError` naming it."""
    dirs = definition_dirs(cwd.resolve(), _user_config_dir())
    return SubagentRunner(
        load_definitions(dirs, known_tools=tool_names),
        context_note=context_note(cwd=str(cwd), memory=memory, today=dt.date.today().isoformat()),
        model_streamer=lambda spec: streamer_for(
            build_provider(
                spec,
                base_url=(url := _same_provider_url(settings, spec)),
                cwd=cwd,
                endpoint=endpoint_for(settings, url),
            )
        ),
        version=version(),
    )


def _same_provider_url(settings: Settings, spec: str) -> str | None:
    """`base_url` reaches models of the main model's provider only, as in role lists."""
    return settings.base_url if spec.partition(":")[0] == settings.provider else None


def daily_budget(settings: Settings, store: EventStore) -> DailyBudget | None:
    """The day's budgets from settings, read from the event store; None when none is set."""
    limits = DailyLimits(
        max_cost_usd=settings.limits.max_cost_usd_per_day,
        max_tokens=settings.limits.max_tokens_per_day,
    )
    return DailyBudget(limits, store) if limits.any else None


def policy_gate(
    settings: Settings, cwd: Path, session_id: str, tools: ToolRegistry, executor: Executor
) -> PermissionGate:
    """Permission rules and hooks from settings; raises `ConfigError` for a rule naming no tool."""
    permissions = settings.permissions
    lists = {"allow": permissions.allow, "ask": permissions.ask, "deny": permissions.deny}
    rules = RuleSet.from_lists(lists, settings.rule_origins)  # type: ignore[arg-type]
    known = {*tools.names(), *COMPAT_NAMES.values()}
    for rule in rules.all_rules():
        if rule.family is None and not rule.tool.startswith("mcp__") and rule.tool not in known:
            close = difflib.get_close_matches(rule.tool, sorted(known | {"Bash", "Read", "Edit"}))
            hint = f'; did you mean "{close[0]}"?' if close else ""
            where = f" in {rule.origin}" if rule.origin else ""
            raise ConfigError(f"permission rule {rule.text!r}{where} names no tool{hint}")
    configured = {
        event: [
            HookMatcher(
                matcher=m.matcher,
                hooks=tuple(
                    HookCommand(command=h.command, timeout_s=h.timeout, on_error=h.on_error)
                    for h in m.hooks
                ),
            )
            for m in getattr(settings.hooks, event)
        ]
        for event in type(settings.hooks).model_fields
    }
    hooks = None
    if any(configured.values()):
        hooks = HookRunner(configured, cwd=cwd, session_id=session_id)  # type: ignore[arg-type]
    return PermissionGate(
        rules=rules,
        hooks=hooks,
        dirty=lambda: has_uncommitted_work(cwd),
        sandboxed=isinstance(executor, BwrapExecutor),
    )


def has_uncommitted_work(root: Path) -> bool:
    """Whether `root`'s git work tree has changes or untracked files; unknown counts as yes."""
    try:
        done = run_git(
            root,
            ["status", "--porcelain", "--untracked-files=normal"],
            timeout_s=10,
            user_config=True,
        )
    except (UnsafeRepository, NotARepository, GitUnavailable):
        return True
    return not done.ok or bool(done.stdout.strip())


async def _search(index: CodeIndex, root: Path, text: str, k: int) -> SearchResult:
    """The engine's ranking of `root` for `text` (the first context's search)."""
    return await index.run(root, lambda engine: engine.search(text, k))


def _open_index(root: Path) -> ContextEngine:
    """The context engine for a workspace, its index in the user's cache directory."""
    return ContextEngine.open(
        root,
        embedder=default_embedder(),
        ranker=default_ranker(),
        definition_ranker=default_definition_ranker(),
    )


def _user_config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kestrel"
