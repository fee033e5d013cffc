"""`kestrel -p`: output formats, exit codes and errors, as a script or CI sees them."""

from __future__ import annotations

import json

import jsonschema
from cli_kit import Env, lines_of, types

from kestrel.protocol.codec import record_json_schema


def test_stream_json_is_valid_against_the_documented_schema(env: Env) -> None:
    done = env.run(*env.headless("--output-format", "stream-json"))
    assert done.returncode == 0, done.stderr
    records = lines_of(done.stdout)
    validator = jsonschema.Draft202012Validator(record_json_schema())
    for record in records:
        validator.validate(record)
    first, last = records[0], records[-1]
    assert first["event"]["type"] == "session_started"  # type: ignore[index]
    assert first["event"]["session_id"] == first["session_id"]  # type: ignore[index]
    # The run finishes, then its change, made in an overlay, is handed over to the checkout.
    assert types(records)[-4:] == [
        "session_finished",
        "checkpoint_created",
        "changes_ready",
        "changes_applied",
    ] or types(records)[-3:] == ["session_finished", "changes_ready", "changes_applied"]
    finished = next(r for r in records if r["event"]["type"] == "session_finished")  # type: ignore[index]
    assert finished["event"]["reason"] == "done"  # type: ignore[index]
    assert last["event"]["outcome"] == "applied"  # type: ignore[index]
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert "model_text_delta" in types(records) and "tool_output_chunk" in types(records)
    assert "return a + b" in (env.project / "calc.py").read_text()


def test_schema_rejects_a_record_with_a_wrong_field() -> None:
    validator = jsonschema.Draft202012Validator(record_json_schema())
    bad = {
        "v": 1,
        "session_id": "s",
        "seq": 1,
        "at": 0.0,
        "event": {"type": "tool_finished", "call_id": "c", "name": "x", "content": 3},
    }
    assert not validator.is_valid(bad)


def test_text_output_prints_the_final_answer(env: Env) -> None:
    done = env.run(*env.headless())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Fixed: add now adds."


def test_json_output_is_one_result_object(env: Env) -> None:
    done = env.run(*env.headless("--output-format", "json"))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["type"] == "result" and result["reason"] == "done"
    assert result["final_text"] == "Fixed: add now adds."
    assert result["totals"]["turns"] == 7 and result["totals"]["tool_calls"] == 6
    assert result["exit_code"] == 0 and len(result["session_id"]) == 20


def test_a_budget_stop_exits_3_and_says_how_to_continue(env: Env) -> None:
    done = env.run(*env.headless("--max-turns", "2"))
    assert done.returncode == 3
    assert "budget" in done.stderr and "kestrel resume" in done.stderr


def test_headless_default_mode_denies_commands_and_edits(env: Env) -> None:
    args = ["-p", "fix", "--model", f"scripted:{env.script}", "--output-format", "stream-json"]
    done = env.run(*args)
    assert done.returncode == 0
    denied = [
        r
        for r in lines_of(done.stdout)
        if r["event"]["type"] == "permission_decided"  # type: ignore[index]
        and r["event"]["decision"] == "deny"
    ]  # type: ignore[index]
    assert len(denied) == 2  # the edit and the write
    allowed = [
        r["event"]
        for r in lines_of(done.stdout)
        if r["event"]["type"] == "permission_decided"  # type: ignore[index]
        and r["event"]["decided_by"] == "rule"  # type: ignore[index]
    ]
    # The user's settings allow the test command (see cli_kit), so both test runs ran.
    assert len(allowed) == 2 and all("Bash(" in e["source"] for e in allowed)  # type: ignore[index]
    assert (env.project / "calc.py").read_text().count("a - b") == 1


def test_bad_settings_file_is_a_clear_error_naming_file_and_field(env: Env) -> None:
    settings = env.project / ".kestrel" / "settings.toml"
    settings.parent.mkdir()
    settings.write_text('[limits]\nmax_turns = "ten"\n')
    done = env.run(*env.headless())
    assert done.returncode == 2
    assert str(settings) in done.stderr and "limits.max_turns" in done.stderr


def test_unknown_provider_and_missing_script_are_clear_errors(env: Env) -> None:
    done = env.run("-p", "x", "--model", "nonsense")
    assert done.returncode == 2 and "provider:model-id" in done.stderr
    done = env.run("-p", "x", "--model", "scripted:missing.json")
    assert done.returncode == 2 and "missing.json" in done.stderr and "not found" in done.stderr


def test_no_task_is_a_usage_error(env: Env) -> None:
    done = env.run("-p")
    assert done.returncode == 2 and "no task" in done.stderr


def test_sessions_list_show_export(env: Env) -> None:
    done = env.run(*env.headless("--output-format", "json"))
    session_id = json.loads(done.stdout)["session_id"]
    listed = json.loads(env.run("sessions", "list", "--json").stdout)
    assert [s["session_id"] for s in listed] == [session_id]
    assert listed[0]["status"] == "done" and listed[0]["task"] == "fix the failing tests"
    exported = lines_of(env.run("sessions", "export", session_id[:6]).stdout)
    assert exported[0]["event"]["session_id"] == session_id  # type: ignore[index]
    assert types(exported)[-1] == "changes_applied"  # After the run, its change is applied.
    shown = env.run("sessions", "show", session_id)
    assert (
        shown.returncode == 0 and "grep" in shown.stdout and "Fixed: add now adds." in shown.stdout
    )
    missing = env.run("sessions", "show", "zzzz")
    assert missing.returncode == 2 and "zzzz" in missing.stderr


def test_a_missing_api_key_stops_before_any_session_starts(env: Env) -> None:
    env.vars.pop("ANTHROPIC_API_KEY", None)
    done = env.run("-p", "hello", "--model", "anthropic:claude-sonnet-4-5")
    assert done.returncode == 2 and "ANTHROPIC_API_KEY is not set" in done.stderr
    assert json.loads(env.run("sessions", "list", "--json").stdout) == []
