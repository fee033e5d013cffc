"""Subagent definition files: the front-matter subset, precedence, and errors that name the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kestrel.agent.agent_defs import (
    AgentDefinitionError,
    builtin_agents,
    definition_dirs,
    load_definitions,
    parse_definition,
)

GOOD = """---
# a comment
name: tester
description: "Runs the tests: reports failures."
tools:
  - read_file
  - bash
model: anthropic:claude-haiku-4-5
permission-mode: accept-edits
max-turns: 12
---
You run the tests.

Report each failure.
"""


def test_a_full_definition_parses() -> None:
    d = parse_definition(GOOD, source="tester.md")
    assert (d.name, d.description) == ("tester", "Runs the tests: reports failures.")
    assert d.tools == ("read_file", "bash")
    assert (d.model, d.role) == ("anthropic:claude-haiku-4-5", None)
    assert (d.permission_mode, d.max_turns) == ("accept-edits", 12)
    assert d.prompt == "You run the tests.\n\nReport each failure."
    assert d.lines["tools"] == 5


@pytest.mark.parametrize(
    "tools", ["tools: [read_file, 'grep']", "tools: read_file, grep", "tools:\n- read_file\n- grep"]
)
def test_lists_in_each_form(tools: str) -> None:
    d = parse_definition(
        f"---\ndescription: d\n{tools}\n---\nbody", source="x.md", default_name="x"
    )
    assert d.tools == ("read_file", "grep")


def test_defaults_name_from_the_file_and_the_main_role() -> None:
    d = parse_definition(
        "---\ndescription: d\nmodel: fast\n---\nbody", source="a.md", default_name="a"
    )
    assert (d.name, d.tools, d.role, d.permission_mode, d.max_turns) == (
        "a",
        None,
        "fast",
        None,
        None,
    )
    plain = parse_definition("---\ndescription: d\n---\nbody", source="b.md", default_name="b")
    assert plain.role == "main"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\n---\nbody", "x.md:1: a subagent definition starts with a '---' line"),
        ("---\ndescription: d\nbody", "x.md:1: the front matter has no closing '---' line"),
        (
            "---\ndescription: d\ncolour: red\n---\nb",
            "x.md:3: unknown key 'colour'; known keys: name",
        ),
        ("---\ndescription: d\njust words\n---\nb", "x.md:3: expected 'key: value'"),
        ("---\ndescription: d\n- grep\n---\nb", "x.md:3: a list item ('- ...') must follow a key"),
        ("---\ndescription: d\ntools: [grep\n---\nb", "x.md:3: a list opened with '[' needs a ']'"),
        ("---\ndescription: d\ntools: [grep,,x]\n---\nb", "x.md:3: empty item in the list"),
        ("---\ndescription: d\ntools:\n---\nb", "x.md:3: tools is empty"),
        ("---\ndescription: d\npermission-mode: yolo\n---\nb", "x.md:3: permission-mode 'yolo'"),
        ("---\ndescription: d\nmax-turns: many\n---\nb", "x.md:3: max-turns 'many' must be"),
        ("---\ndescription: d\nmax-turns: 0\n---\nb", "x.md:3: max-turns '0' must be"),
        ("---\ndescription: d\nmodel: gpt\n---\nb", "x.md:3: model 'gpt' must be a role"),
        ("---\nname: Bad Name\ndescription: d\n---\nb", "x.md:2: name 'Bad Name' must be"),
        ("---\nname: x\n---\nbody", "x.md:1: a description is required"),
        (
            "---\ndescription: d\ndescription: e\n---\nb",
            "x.md:3: 'description' is set twice (first on line 2)",
        ),
        ("---\ndescription: d\nmodel: [a, b]\n---\nb", "x.md:3: model must be one value"),
        ("---\ndescription: d\n---\n\n", "x.md:3: the definition has no body"),
    ],
)
def test_malformed_definitions_name_the_file_and_line(text: str, message: str) -> None:
    with pytest.raises(AgentDefinitionError) as caught:
        parse_definition(text, source="x.md", default_name="x")
    assert str(caught.value).startswith(message)


def test_without_a_name_or_a_file_name_it_is_refused() -> None:
    with pytest.raises(AgentDefinitionError, match=r"^x\.md:2: a name is required$"):
        parse_definition("---\nname: ''\ndescription: d\n---\nbody", source="x.md")


def _write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.md"
    path.write_text(text)
    return path


def test_project_definitions_override_user_ones_and_built_ins(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    user = tmp_path / "config"
    _write(user / "agents", "explore", "---\ndescription: the user's\n---\nu")
    _write(user / "agents", "helper2", "---\ndescription: only the user's\n---\nh")
    _write(repo / ".kestrel" / "agents", "explore", "---\ndescription: the project's\n---\np")
    dirs = definition_dirs(repo, user)
    assert dirs == [user / "agents", repo / ".kestrel" / "agents"]
    found = load_definitions(dirs)
    assert found["explore"].description == "the project's"
    assert found["explore"].source == str(repo / ".kestrel" / "agents" / "explore.md")
    assert found["helper2"].description == "only the user's"
    assert set(builtin_agents()) <= set(found)


def test_a_definition_naming_an_unknown_tool_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "x", "---\ndescription: d\n\ntools: [grep, teleport]\n---\nb")
    with pytest.raises(AgentDefinitionError) as caught:
        load_definitions([tmp_path], known_tools=["grep", "read_file"])
    assert str(caught.value) == (f"{path}:4: unknown tool(s) teleport; available: grep, read_file")


def test_an_unreadable_definition_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bin.md"
    path.write_bytes(b"---\n\xff\xfe\n---\n")
    with pytest.raises(AgentDefinitionError, match=f"{path}: cannot read the definition"):
        load_definitions([tmp_path])
