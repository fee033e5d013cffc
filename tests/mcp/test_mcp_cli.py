"""`kestrel mcp list|add|remove|test` in a real repository with a real home."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from client_kit import TOOLBOX, Project


def test_add_list_test_and_remove_a_user_server(tmp_path: Path) -> None:
    project = Project(tmp_path)
    added = project.kestrel("mcp", "add", "toolbox", "--", sys.executable, str(TOOLBOX), "stdio")
    assert "added MCP server 'toolbox'" in added.stdout
    stored = json.loads((project.config / "mcp.json").read_text())
    assert stored == {
        "mcpServers": {"toolbox": {"command": sys.executable, "args": [str(TOOLBOX), "stdio"]}}
    }
    listed = project.kestrel("mcp", "list").stdout
    assert "toolbox" in listed and "stdio" in listed and str(project.config / "mcp.json") in listed
    tested = project.kestrel("mcp", "test", "toolbox")
    assert "tools (7), offered as mcp__toolbox__TOOL:" in tested.stdout
    assert "add    read-only" in tested.stdout and "note   asks" in tested.stdout
    assert "notes://readme  readme" in tested.stdout
    assert "review  Ask for a review of one file." in tested.stdout
    removed = project.kestrel("mcp", "remove", "toolbox")
    assert "removed MCP server 'toolbox'" in removed.stdout
    assert "no MCP servers configured" in project.kestrel("mcp", "list").stdout


def test_a_project_server_is_shared_in_mcp_json_and_shown_untrusted(tmp_path: Path) -> None:
    project = Project(tmp_path)
    project.kestrel(
        "mcp",
        "add",
        "docs",
        "--scope",
        "project",
        "--transport",
        "http",
        "https://docs.example/mcp",
        "--header",
        "Authorization: Bearer ${DOCS_TOKEN}",
    )
    stored = json.loads((project.root / ".mcp.json").read_text())
    assert stored["mcpServers"]["docs"] == {
        "type": "http",
        "url": "https://docs.example/mcp",
        "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"},
    }
    listed = project.kestrel("mcp", "list").stdout
    assert "not trusted" in listed and "headers: Authorization" in listed
    assert "${DOCS_TOKEN}" not in listed


def test_bad_input_gets_a_clear_error_and_changes_nothing(tmp_path: Path) -> None:
    project = Project(tmp_path)
    cases = [
        ("mcp", "add", "a__b", "--", "x"),
        ("mcp", "add", "ok", "--env", "NOEQUALS", "--", "x"),
        ("mcp", "add", "ok", "--transport", "http", "ftp://nope"),
        ("mcp", "add", "ok"),
        ("mcp", "test", "missing"),
    ]
    for args in cases:
        done = project.kestrel(*args, check=False)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert done.stderr.startswith("kestrel: ") and "Traceback" not in done.stderr
    assert not (project.config / "mcp.json").exists()
    (project.config / "mcp.json").write_text("{not json")
    broken = project.kestrel("mcp", "list", check=False)
    assert broken.returncode == 2 and "invalid JSON" in broken.stderr
    assert (project.config / "mcp.json").read_text() == "{not json"


def test_a_server_that_fails_to_start_is_reported_with_its_last_words(tmp_path: Path) -> None:
    project = Project(tmp_path)
    project.user_servers({"broken": {"command": sys.executable, "args": ["-c", "import nope"]}})
    done = project.kestrel("mcp", "test", "broken", check=False)
    assert done.returncode == 1
    assert "could not be started" in done.stderr and "No module named 'nope'" in done.stderr
    assert "Traceback (most recent" not in done.stderr.split("last words")[0]
