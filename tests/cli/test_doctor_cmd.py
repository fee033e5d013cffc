"""`kestrel doctor`'s checks in-process: offline by default, every settings problem, the report."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kestrel.cli.doctor_checks import data_checks, settings_checks
from kestrel.cli.doctor_cmd import passed, render_checks, run_checks
from kestrel.cli.doctor_model import DoctorCheck
from kestrel.settings_load import LayerReport


class _Models(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that only lists one model, counting each request."""

    seen: list[str] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        body = json.dumps({"object": "list", "data": [{"id": "local", "object": "model"}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def server() -> Iterator[tuple[str, list[str]]]:
    """A loopback server's base URL and the paths it was asked for."""
    seen: list[str] = []
    handler = type("Handler", (_Models,), {"seen": seen})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", seen
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def env_for(home: Path, tmp_path: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "KESTREL_DATA_DIR": str(tmp_path / "data"),
        "KESTREL_CACHE_DIR": str(tmp_path / "cache"),
    }


def test_the_configured_models_are_checked_without_a_network_call(
    server: tuple[str, list[str]], home: Path, tmp_path: Path
) -> None:
    url, seen = server
    settings = home / ".config" / "kestrel" / "settings.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text(f'model = "openai:local"\nbase_url = "{url}"\n')
    env = env_for(home, tmp_path)
    checks = run_checks(tmp_path, env=env, home=home)
    credentials = [c for c in checks if c.name == "credentials"]
    assert [c.status for c in credentials] == ["ok"]
    assert credentials[0].detail.startswith("openai:local (main, plan, fast, edit): ")
    assert seen == []  # Nothing was asked of the endpoint.
    chosen = run_checks(tmp_path, env=env, home=home, model="openai:local")
    assert any(c.detail.startswith("openai:local (chosen)") for c in chosen)
    assert seen, "--model probes the chosen model's endpoint"


def test_settings_checks_list_each_file_with_all_its_problems(home: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(home / ".config")}
    user = home / ".config" / "kestrel" / "settings.toml"
    project = Path("/repo/.kestrel/settings.toml")
    reports = [
        LayerReport(str(project), project, ("one", "two")),
        LayerReport("environment", None, ()),
        LayerReport("command line", None, ("--model: bad",)),
    ]
    assert settings_checks(reports, env=env, home=home) == [
        DoctorCheck("settings", "ok", f"{user}: none yet; the defaults apply"),
        DoctorCheck("settings", "fail", "one\ntwo", fix=f"edit {project} (2 problems)"),
        DoctorCheck("settings", "fail", "--model: bad", fix="correct the options named above"),
    ]


def test_a_data_directory_inside_a_file_fails(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    data, disk = data_checks(blocker / "data")
    assert (data.status, data.detail) == (
        "fail",
        f"{blocker / 'data'}: {blocker} is a file, not a folder",
    )
    assert disk.name == "disk"
    fine, _ = data_checks(tmp_path / "new" / "data")
    assert (fine.status, fine.detail) == (
        "ok",
        f"{tmp_path / 'new' / 'data'}: not there yet; it will be created",
    )
    existing = tmp_path / "existing"
    existing.mkdir()
    assert data_checks(existing)[0].detail == f"{existing}: writable"


def test_the_report_puts_extra_lines_and_fixes_under_their_check() -> None:
    checks = [
        DoctorCheck("settings", "fail", "first problem\nsecond problem", fix="edit it"),
        DoctorCheck("git", "ok", "2.39", fix="never shown for ok"),
        DoctorCheck("repository", "warn", "not a repository", fix="git init"),
        DoctorCheck("index", "info", "not indexed yet"),
    ]
    assert render_checks(checks, Path("/p")).splitlines() == [
        "kestrel doctor: what a run in /p needs",
        "  FAIL  settings: first problem",
        "        second problem",
        "        fix: edit it",
        "  ok    git: 2.39",
        "  warn  repository: not a repository",
        "        fix: git init",
        "  info  index: not indexed yet",
        "NOT ready: 1 check failed, 1 warning; each fix is under it",
    ]
    assert not passed(checks)
    assert passed(checks[1:])
    assert render_checks(checks[1:], Path("/p")).splitlines()[-1] == (
        "ready: nothing failed, 1 warning"
    )
