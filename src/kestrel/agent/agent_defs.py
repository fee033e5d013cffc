"""Subagent definitions: the built-in ones, and Markdown files with a small front matter.

A definition file is `.kestrel/agents/NAME.md` in the repository (or `agents/NAME.md` in the
user's config directory). Its front matter, between two `---` lines, holds `key: value` lines:
`name`, `description`, `tools` (a list), `model` (a role or `provider:model-id`),
`permission-mode` and `max-turns`. Lists are written `[a, b]`, `a, b`, or as `- a` lines under
the key. The body after the front matter is the subagent's system prompt. There is no YAML
library here on purpose: the subset is small, and every mistake is reported with its file and
line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events import ModelRole, PermissionMode
from kestrel.protocol.oserrors import error_text

ROLES: tuple[ModelRole, ...] = get_args(ModelRole)
MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)
READ_ONLY_TOOLS = (
    "read_file",
    "list_files",
    "grep",
    "search_code",
    "find_symbol",
    "find_references",
    "outline",
    "repo_map",
)
"""The tools of the built-in read-only agents; those a session does not offer are left out."""
MAX_TURNS_LIMIT = 1000
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_KEYS = {
    "name": "name",
    "description": "description",
    "tools": "tools",
    "model": "model",
    "permission-mode": "permission_mode",
    "permission_mode": "permission_mode",
    "permissionmode": "permission_mode",
    "max-turns": "max_turns",
    "max_turns": "max_turns",
    "maxturns": "max_turns",
}
_KNOWN_KEYS = "name, description, tools, model, permission-mode, max-turns"

_Fail = Callable[[str, str], "AgentDefinitionError"]
"""Builds the error for a key's line: the key and the message in, the error out."""


class AgentDefinitionError(ConfigError):
    """A subagent definition file is malformed; the message names the file and the line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentDefinition:
    """What a subagent is: its instructions, its tools, its model and its limits."""

    name: str
    description: str
    prompt: str
    """The subagent's system prompt."""
    tools: tuple[str, ...] | None = None
    """The tools it may call, by name; None: every tool of the parent except `task`."""
    model: str = "main"
    """A model role (`main`, `plan`, `fast`, `edit`) or a `provider:model-id`."""
    permission_mode: PermissionMode | None = None
    """Its permission mode, never wider than the parent's; None: the parent's."""
    max_turns: int | None = None
    source: str = "built-in"
    """Where it was defined: `built-in` or the file's path."""
    lines: Mapping[str, int] = field(default_factory=dict)
    """The line of each front-matter key, for errors found after parsing."""

    @property
    def role(self) -> ModelRole | None:
        """The role whose models answer it; None when it names a model."""
        return self.model if self.model in ROLES else None


_EXPLORE = """\
You are a read-only explorer working for another agent. Search and read the repository to answer
the question you are given; you cannot change anything. Work fast: use grep, list_files and the
code-search tools to find candidates, then read only what you need.

Finish with one report, your last message, which is all the caller will see: the findings that
answer the question, each with its file path and line numbers (path:line), and what you looked at
but ruled out. Quote short snippets where they help; do not paste whole files."""

_PLAN = """\
You are a planner working for another agent. Explore the repository read-only (you cannot change
anything) until you understand what the task you are given needs, then finish with one report,
your last message, which is all the caller will see: a numbered plan of small steps, each naming
the files to change (path:line where it helps), what to change there, how to check the step
(commands or tests), and which steps must come first. End with the risks and open questions."""

_REVIEW = """\
You are a code reviewer working for another agent. Review the change or the files you are given,
read-only (you cannot change anything): read the changed code and what it calls, look for bugs,
missed cases, broken contracts, security problems, and missing or weak tests. If you are not told
what changed, look for it: files named in the request, recently touched code, or a `git diff` in
the output the caller gave you.

Finish with one report, your last message, which is all the caller will see: each problem with
its file path and line, why it is a problem, and a suggested fix, the most serious first. Say so
plainly if you found nothing wrong."""


def builtin_agents() -> dict[str, AgentDefinition]:
    """The built-in subagents: `explore`, `plan` and `review`, all read-only."""
    return {
        "explore": AgentDefinition(
            name="explore",
            description="Read-only search of the repository: finds code and answers questions "
            "about it, reporting findings with paths and line numbers. Use it for broad "
            "searches whose intermediate results you do not need.",
            prompt=_EXPLORE,
            tools=READ_ONLY_TOOLS,
            model="fast",
            permission_mode="plan",
            max_turns=30,
        ),
        "plan": AgentDefinition(
            name="plan",
            description="Read-only planner: explores the code and returns a step-by-step plan "
            "(files, changes, checks, order) for the task it is given.",
            prompt=_PLAN,
            tools=READ_ONLY_TOOLS,
            permission_mode="plan",
            max_turns=30,
        ),
        "review": AgentDefinition(
            name="review",
            description="Read-only reviewer: reviews the current change or the files it is "
            "given and reports problems with paths, lines and suggested fixes.",
            prompt=_REVIEW,
            tools=READ_ONLY_TOOLS,
            permission_mode="plan",
            max_turns=30,
        ),
    }


def parse_definition(text: str, *, source: str, default_name: str = "") -> AgentDefinition:
    """One definition from a file's text; `AgentDefinitionError` names `source` and the line."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise AgentDefinitionError(
            f"{source}:1: a subagent definition starts with a '---' line, then its front matter "
            "(name, description, tools, model, permission-mode, max-turns), then another '---'"
        )
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise AgentDefinitionError(f"{source}:1: the front matter has no closing '---' line")
    values, where = _front_matter(lines[1:end], source)
    body = "\n".join(lines[end + 1 :]).strip()
    if not body:
        raise AgentDefinitionError(
            f"{source}:{end + 1}: the definition has no body: write the subagent's system "
            "prompt after the closing '---'"
        )
    return _definition(values, where, body, source, default_name)


def _front_matter(
    lines: list[str], source: str
) -> tuple[dict[str, str | list[str]], dict[str, int]]:
    """Key-value pairs (a list for `- item` lines under a key) and each key's line number."""
    values: dict[str, str | list[str]] = {}
    where: dict[str, int] = {}
    open_list: str | None = None
    for number, raw in enumerate(lines, start=2):
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.lstrip().startswith("- ") or line.strip() == "-":
            item = _unquote(line.strip()[1:].strip())
            if open_list is None:
                raise AgentDefinitionError(
                    f"{source}:{number}: a list item ('- ...') must follow a key with no value, "
                    "such as 'tools:'"
                )
            if not item:
                raise AgentDefinitionError(f"{source}:{number}: empty list item")
            held = values[open_list]
            values[open_list] = [*(held if isinstance(held, list) else []), item]
            continue
        key, colon, value = line.partition(":")
        if not colon or not key.strip() or key != key.lstrip():
            raise AgentDefinitionError(
                f"{source}:{number}: expected 'key: value' at the start of the line, got "
                f"{line.strip()!r}"
            )
        name = _KEYS.get(key.strip().lower())
        if name is None:
            raise AgentDefinitionError(
                f"{source}:{number}: unknown key {key.strip()!r}; known keys: {_KNOWN_KEYS}"
            )
        if name in values:
            raise AgentDefinitionError(
                f"{source}:{number}: {key.strip()!r} is set twice (first on line {where[name]})"
            )
        where[name] = number
        value = value.strip()
        open_list = name if not value else None
        values[name] = _parse_value(value, source, number)
    return values, where


def _parse_value(value: str, source: str, number: int) -> str | list[str]:
    if value.startswith("["):
        if not value.endswith("]"):
            raise AgentDefinitionError(f"{source}:{number}: a list opened with '[' needs a ']'")
        inner = value[1:-1].strip()
        items = [_unquote(part.strip()) for part in inner.split(",")] if inner else []
        if any(not item for item in items):
            raise AgentDefinitionError(f"{source}:{number}: empty item in the list {value}")
        return items
    return _unquote(value)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _definition(
    values: Mapping[str, str | list[str]],
    where: Mapping[str, int],
    body: str,
    source: str,
    default_name: str,
) -> AgentDefinition:
    def fail(key: str, message: str) -> AgentDefinitionError:
        return AgentDefinitionError(f"{source}:{where.get(key, 1)}: {message}")

    def text(key: str) -> str | None:
        value = values.get(key)
        if isinstance(value, list):
            raise fail(key, f"{key.replace('_', '-')} must be one value, not a list")
        return value

    name = text("name") or default_name
    if not name:
        raise fail("name", "a name is required")
    if not _NAME.fullmatch(name):
        raise fail(
            "name",
            f"name {name!r} must be lowercase letters, digits, '-' or '_' (at most 64), "
            "starting with a letter or digit",
        )
    description = text("description")
    if not description:
        raise fail("description", "a description is required: the model reads it to choose")
    return AgentDefinition(
        name=name,
        description=description,
        prompt=body,
        tools=_tools(values.get("tools"), fail),
        model=_model(text("model"), fail),
        permission_mode=_mode(text("permission_mode"), fail),
        max_turns=_max_turns(text("max_turns"), fail),
        source=source,
        lines=dict(where),
    )


def _tools(value: str | list[str] | None, fail: _Fail) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not value:
        raise fail("tools", "tools is empty: list at least one tool, or leave the key out")
    items = value if isinstance(value, list) else [v.strip() for v in value.split(",")]
    if any(not item for item in items):
        raise fail("tools", "empty tool name in tools")
    return tuple(dict.fromkeys(items))


def _model(value: str | None, fail: _Fail) -> str:
    if value is None or value == "":
        return "main"
    provider, colon, model_id = value.partition(":")
    if value in ROLES or (colon and provider and model_id):
        return value
    raise fail(
        "model",
        f"model {value!r} must be a role ({', '.join(ROLES)}) or provider:model-id",
    )


def _mode(value: str | None, fail: _Fail) -> PermissionMode | None:
    if value is None or value == "":
        return None
    if value not in MODES:
        raise fail(
            "permission_mode", f"permission-mode {value!r} must be one of {', '.join(MODES)}"
        )
    return value


def _max_turns(value: str | None, fail: _Fail) -> int | None:
    if value is None or value == "":
        return None
    if not value.isdigit() or not 1 <= int(value) <= MAX_TURNS_LIMIT:
        raise fail("max_turns", f"max-turns {value!r} must be a whole number from 1 to 1000")
    return int(value)


def load_definitions(
    directories: Iterable[Path], *, known_tools: Collection[str] | None = None
) -> dict[str, AgentDefinition]:
    """Built-ins, then each directory's `*.md` in order, a later definition replacing an earlier
    one of the same name; with `known_tools`, a definition naming another tool is an error."""
    found = builtin_agents()
    for directory in directories:
        for path in sorted(directory.glob("*.md")) if directory.is_dir() else ():
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise AgentDefinitionError(
                    f"{path}: cannot read the definition: {error_text(exc)}"
                ) from exc
            definition = parse_definition(text, source=str(path), default_name=path.stem)
            if known_tools is not None:
                check_tools(definition, known_tools)
            found[definition.name] = definition
    return found


def check_tools(definition: AgentDefinition, known: Collection[str]) -> None:
    """Refuse a definition that names a tool the session does not have."""
    unknown = [t for t in definition.tools or () if t not in known]
    if unknown:
        line = definition.lines.get("tools", 1)
        raise AgentDefinitionError(
            f"{definition.source}:{line}: unknown tool(s) {', '.join(unknown)}; "
            f"available: {', '.join(sorted(known))}"
        )


def definition_dirs(cwd: Path, user_config_dir: Path | None) -> list[Path]:
    """Where definitions live, lowest precedence first: the user's, then the repository's
    `.kestrel/agents` from the repository root down to `cwd`."""
    dirs = [] if user_config_dir is None else [user_config_dir / "agents"]
    chain = [cwd, *cwd.parents]
    top = next((i for i, d in enumerate(chain) if (d / ".git").exists()), 0)
    dirs.extend(d / ".kestrel" / "agents" for d in reversed(chain[: top + 1]))
    return dirs
