"""The security gate in real headless sessions (scripted model, real git repositories): each risky
change is fed back to the model like a failing test, is never applied on its own in any mode,
and is applied only with the person's explicit, recorded acceptance."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import pytest
from security_kit import (
    APP,
    AWS_KEY,
    PRIVATE_KEY,
    Project,
    bash_call,
    events,
    of_type,
    session_id,
    write_call,
)

from kestrel.protocol.events import ChangesApplied
from kestrel.store.sqlite import SQLiteStore

DONE: dict[str, object] = {"text": "Done."}
HANDLER = (
    '"""Request handlers."""\n\nimport subprocess\n\nimport yaml\n\n\n'
    "def handle(user_input, data, cursor, name):\n{body}\n"
)
CHANGES = {
    "aws-key": ("app/settings.py", APP + f'\nAWS_ACCESS_KEY_ID = "{AWS_KEY}"\n', "AWS Access Key"),
    "private-key": ("app/settings.py", APP + f'\nKEY = """{PRIVATE_KEY}"""\n', "private-key"),
    "shell": (
        "app/handlers.py",
        HANDLER.format(body="    return subprocess.run(user_input, shell=True)"),
        "B602",
    ),
    "yaml-load": ("app/handlers.py", HANDLER.format(body="    return yaml.load(data)"), "B506"),
    "sql": (
        "app/handlers.py",
        HANDLER.format(
            body="    cursor.execute(\"SELECT * FROM users WHERE name = '%s'\" % name)\n"
            "    return cursor.execute(f\"DELETE FROM users WHERE name = '{name}'\")"
        ),
        "B608",
    ),
}
START = {"app/settings.py": APP, "README.md": "# app\n"}


def _project(tmp_path: Path, settings: str = "") -> Project:
    project = Project(tmp_path, START)
    project.settings.write_text(settings)
    return project


def _log(project: Project, sid: str) -> list[object]:
    store = SQLiteStore(project.data / "sessions.db")
    try:
        return [record.event for record in store.read(sid)]
    finally:
        store.close()


@pytest.mark.parametrize("case", sorted(CHANGES))
def test_a_risky_change_goes_back_to_the_model_and_is_never_applied(
    tmp_path: Path, case: str
) -> None:
    path, content, code = CHANGES[case]
    project = _project(tmp_path)

    # The model writes the change, then claims to be done without fixing it, every time.
    done = project.session([write_call(path, content), DONE, DONE, DONE, DONE, DONE])

    found = events(done.stdout)
    verifications = of_type(found, "verification_finished")
    assert verifications and all(v["blocking"] and not v["ok"] for v in verifications)
    kinds = {(f["kind"], f["code"]) for f in verifications[0]["failures"]}  # type: ignore[attr-defined]
    assert ("security", code) in kinds, verifications[0]
    notes = [e["text"] for e in of_type(found, "context_added") if e["source"] == "verification"]
    assert notes and "[security/" in str(notes[0]) and code in str(notes[0])
    assert of_type(found, "session_finished")[0]["reason"] == "unverified"
    assert done.returncode != 0
    assert not (project.root / "app/handlers.py").exists()
    assert (project.root / "app/settings.py").read_text() == APP

    # Applying it by hand is refused too, with the way to accept it.
    sid = session_id(done.stdout)
    applied = project.run("apply", sid)

    assert applied.returncode == 1, applied.stderr
    assert "--accept-security-findings" in applied.stderr and code in applied.stderr
    assert (project.root / "app/settings.py").read_text() == APP
    [refused] = [e for e in _log(project, sid) if isinstance(e, ChangesApplied)]
    assert refused.outcome == "refused" and any(code in p for p in refused.problems)


MODES = [
    "accept-edits",
    pytest.param(
        "bypass",
        marks=pytest.mark.skipif(shutil.which("bwrap") is None, reason="bypass needs the sandbox"),
    ),
]


@pytest.mark.parametrize("mode", MODES)
def test_the_apply_at_the_end_of_a_run_is_refused_then_accepted_on_record(
    tmp_path: Path, mode: str
) -> None:
    # Without verification the run ends `done` and would apply its change on its own.
    project = _project(tmp_path, "[verify]\nenabled = false\n")
    path, content, _ = CHANGES["shell"]

    done = project.session([write_call(path, content), DONE], mode=mode)

    found = events(done.stdout)
    assert of_type(found, "session_finished")[0]["reason"] == "done"
    [refused] = of_type(found, "changes_applied")
    assert refused["outcome"] == "refused", refused
    assert done.returncode == 1
    assert "--accept-security-findings" in done.stdout + done.stderr
    assert not (project.root / path).exists()

    sid = session_id(done.stdout)
    accepted = project.run("apply", sid, "--accept-security-findings")

    assert accepted.returncode == 0, accepted.stderr
    assert (project.root / path).read_text() == content
    applied = [e for e in _log(project, sid) if isinstance(e, ChangesApplied)]
    assert [e.outcome for e in applied] == ["refused", "applied"]
    [finding] = applied[-1].accepted_findings
    assert finding.startswith(f"{path}:") and "B602" in finding


def test_a_secret_s_value_is_in_no_event_and_no_log(tmp_path: Path) -> None:
    # The key reaches the file through a command, so the model's own call never spells it out:
    # whatever shows the value afterwards would be Kestrel's doing.
    line = f'AWS_ACCESS_KEY_ID = "{AWS_KEY}"\n'
    encoded = base64.b64encode(line.encode()).decode()
    command = f"echo {encoded} | base64 -d >> app/settings.py"
    project = _project(tmp_path, f'[permissions]\nallow = ["Bash({command})"]\n')

    done = project.session([bash_call(command), DONE, DONE, DONE, DONE, DONE])
    sid = session_id(done.stdout)
    refused = project.run("apply", sid)
    shown = project.run("diff", sid, "--stat")

    found = events(done.stdout)
    assert of_type(found, "tool_finished")[0]["is_error"] is False, done.stdout[-2000:]
    assert "AKIA****" in str(of_type(found, "verification_finished")[0])
    assert refused.returncode == 1
    assert "AWS access key" in shown.stdout and "(blocks the apply)" in shown.stdout
    outputs = [done.stdout, done.stderr, refused.stdout, refused.stderr, shown.stdout]
    assert not [text for text in outputs if AWS_KEY in text]
    # The log, its journal and every artifact of the session; the overlay and the checkpoints
    # hold the change itself, so they are not logs.
    logs = [
        p
        for p in project.data.rglob("*")
        if p.is_file() and not {"overlays", "checkpoints"} & set(p.relative_to(project.data).parts)
    ]
    assert any(p.name == "sessions.db" for p in logs)
    assert not [p for p in logs if AWS_KEY.encode() in p.read_bytes()]
    assert AWS_KEY not in str(_log(project, sid))


def test_a_clean_change_has_no_findings_and_is_applied(tmp_path: Path) -> None:
    project = _project(tmp_path)
    content = APP + '\n\ndef bucket() -> str:\n    return os.environ["APP_BUCKET"]\n'

    done = project.session([write_call("app/settings.py", content), DONE])

    found = events(done.stdout)
    [verification] = of_type(found, "verification_finished")
    assert verification["ok"] and verification["failures"] == []
    assert {"name": "security", "status": "passed", "failures": 0} in verification["checks"]  # type: ignore[operator]
    assert of_type(found, "changes_applied")[0]["outcome"] == "applied"
    assert (project.root / "app/settings.py").read_text() == content


def test_a_key_that_was_already_in_the_file_is_not_blamed_on_the_change(tmp_path: Path) -> None:
    # The checkout holds a key already; the session edits another line of the same file.
    old = APP + f'\nLEGACY_KEY = "{AWS_KEY}"\n'
    project = Project(tmp_path, {"app/settings.py": old})
    edit: dict[str, object] = {
        "tool_calls": [
            {
                "name": "edit_file",
                "arguments": {
                    "path": "app/settings.py",
                    "old_str": '"eu-west-1"',
                    "new_str": '"eu-central-1"',
                },
            }
        ]
    }

    done = project.session([edit, DONE])

    found = events(done.stdout)
    [verification] = of_type(found, "verification_finished")
    assert verification["ok"], verification
    assert {"name": "security", "status": "passed", "failures": 0} in verification["checks"]  # type: ignore[operator]
    assert of_type(found, "changes_applied")[0]["outcome"] == "applied"
    assert '"eu-central-1"' in (project.root / "app/settings.py").read_text()
